//go:build linux

package netstat

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nlmsg frames one netlink message: nlmsghdr, payload, padding to 4 bytes.
func nlmsg(typ netlink.HeaderType, seq uint32, payload []byte) []byte {
	l := unix.NLMSG_HDRLEN + len(payload)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint32(b[0:], uint32(l))
	binary.NativeEndian.PutUint16(b[4:], uint16(typ))
	binary.NativeEndian.PutUint16(b[6:], uint16(netlink.Multi))
	binary.NativeEndian.PutUint32(b[8:], seq)
	binary.NativeEndian.PutUint32(b[12:], 4242)
	copy(b[unix.NLMSG_HDRLEN:], payload)
	return b
}

func errnoPayload(code int32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, uint32(code))
	return b
}

func TestDecodeDatagram(t *testing.T) {
	const seq = 7
	diag := func(n byte) []byte { return nlmsg(sockDiagByFamily, seq, []byte{n, 1, 2}) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		datagram []byte
		want     []byte // first payload byte of each decoded message
		done     bool
		err      error // matched with errors.Is; errAny for any error
	}{
		{name: "messages", datagram: cat(diag(1), diag(2), diag(3)), want: []byte{1, 2, 3}},
		{name: "messages then done", datagram: cat(diag(1), nlmsg(netlink.Done, seq, errnoPayload(0))), want: []byte{1}, done: true},
		{name: "done without payload", datagram: nlmsg(netlink.Done, seq, nil), done: true},
		{name: "another request's replies are skipped", datagram: cat(nlmsg(sockDiagByFamily, seq+1, []byte{9}), diag(4)), want: []byte{4}},
		{name: "done carrying an error", datagram: cat(diag(1), nlmsg(netlink.Done, seq, errnoPayload(-int32(unix.EINTR)))), want: []byte{1}, err: unix.EINTR},
		{name: "error reply", datagram: nlmsg(netlink.Error, seq, errnoPayload(-int32(unix.EPERM))), err: unix.EPERM},
		{name: "ack is not a message", datagram: cat(nlmsg(netlink.Error, seq, errnoPayload(0)), diag(5)), want: []byte{5}},
		{name: "length past the datagram", datagram: cat(diag(1), diag(2))[:36], want: []byte{1}, err: errAny},
		{name: "length below the header", datagram: func() []byte { b := diag(1); binary.NativeEndian.PutUint32(b, 8); return b }(), err: errAny},
		{name: "trailing bytes shorter than a header", datagram: cat(diag(1), []byte{0, 0, 0}), want: []byte{1}},
		{name: "empty", datagram: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			done, err := decodeDatagram(tc.datagram, seq, func(m netlink.Message) {
				if m.Header.Type != sockDiagByFamily || m.Header.Sequence != seq || len(m.Data) != 3 {
					t.Errorf("decoded %+v with %d bytes of data", m.Header, len(m.Data))
				}
				got = append(got, m.Data[0])
			})
			if string(got) != string(tc.want) {
				t.Errorf("decoded payloads %v, want %v", got, tc.want)
			}
			if done != tc.done {
				t.Errorf("done = %v, want %v", done, tc.done)
			}
			switch {
			case tc.err == errAny && err == nil:
				t.Errorf("err = nil, want an error")
			case tc.err == nil && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
				t.Errorf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

var errAny = errors.New("any error")

// FuzzDecodeDatagram: no datagram makes the framing panic, read past its
// end, or decode a message whose data is not inside the datagram.
func FuzzDecodeDatagram(f *testing.F) {
	f.Add(nlmsg(sockDiagByFamily, 1, make([]byte, sizeofInetDiagMsg)))
	f.Add(append(nlmsg(sockDiagByFamily, 1, []byte{1}), nlmsg(netlink.Done, 1, errnoPayload(0))...))
	f.Add(nlmsg(netlink.Error, 1, errnoPayload(-1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeDatagram(b, 1, func(m netlink.Message) {
			if int(m.Header.Length) > len(b) || len(m.Data) != int(m.Header.Length)-unix.NLMSG_HDRLEN {
				t.Fatalf("message %+v with %d bytes of data from a %d-byte datagram", m.Header, len(m.Data), len(b))
			}
			_, _, _ = parseInetDiagMessage(m)
		})
	})
}
