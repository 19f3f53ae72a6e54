package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kfakeVersions returns the API keys and versions kfake serves, asked of
// kfake itself: its table (regKey in each NN_*.go) is unexported, and it is
// the same for every cluster that sets no kfake.MaxVersions, as Start does.
// One throwaway one-broker cluster answers an ApiVersions v0 request over an
// in-memory pipe, once per process; nothing touches the network.
var kfakeVersions = sync.OnceValues(askKfakeVersions)

func askKfakeVersions() (versionTable, error) {
	client, server := net.Pipe()
	defer client.Close()
	ln := &pipeListener{conns: make(chan net.Conn, 1), done: make(chan struct{})}
	ln.conns <- server
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }))
	if err != nil {
		return nil, fmt.Errorf("broker: start kfake to read its API versions: %w", err)
	}
	defer kf.Close()

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return nil, fmt.Errorf("broker: ask kfake its API versions: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(client, size[:]); err != nil {
		return nil, fmt.Errorf("broker: read kfake's API versions: %w", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(client, body); err != nil || len(body) < 4 {
		return nil, fmt.Errorf("broker: read kfake's API versions: %v", err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("broker: parse kfake's API versions: %w", err)
	}
	vs := make(versionTable, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		vs[k.ApiKey] = versionRange{min: k.MinVersion, max: k.MaxVersion}
	}
	if _, ok := vs[apiKeyApiVersions]; !ok {
		return nil, errors.New("broker: kfake lists no ApiVersions key in its API versions")
	}
	return vs, nil
}

// pipeListener is a net.Listener that yields the conns sent on conns, for
// the throwaway cluster of kfakeVersions. Its Addr is a TCP address because
// kfake parses its listener's address as host:port for its metadata.
type pipeListener struct {
	conns    chan net.Conn
	done     chan struct{}
	doneOnce sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.doneOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
