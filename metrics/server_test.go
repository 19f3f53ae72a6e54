package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/netstat"
)

func TestConnCap(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{1 << 20, 64}, {20000, 64}, {1024, 64}, {256, 64}, {200, 50}, {16, 4}, {3, 1}, {0, 1}} {
		if got := ConnCap(tc.nofile); got != tc.want {
			t.Errorf("ConnCap(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

// startServer serves fed(3)'s metrics on 127.0.0.1 within o, until the test
// ends.
func startServer(t *testing.T, o ServerOptions) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ln, Handler(fed(3)), o)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// scrapeOnce connects, scrapes /metrics once over HTTP/1.1 keep-alive and
// returns the connection, left open and idle, as Prometheus leaves it
// between scrapes.
func scrapeOnce(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: kdiag\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	resp.Body.Close()
	return c, br
}

// waitClosed waits, at most 30 s, for the server to close c: a read that
// ends in EOF (or a reset).
func waitClosed(c net.Conn, r io.Reader) error {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after 30 s")
	}
	return nil // EOF (io.Copy's nil) or a reset: closed
}

// heldBy counts the ESTABLISHED connections to port that this process has
// accepted: sockets with that local port attributed to one of its fds by
// kdiag's own scanner. The ones still in the kernel's accept queue have no
// fd yet.
func heldBy(t *testing.T, port int) int {
	t.Helper()
	snap, err := netstat.NewScanner("/proc").Scan(context.Background(),
		netstat.Query{States: netstat.States(netstat.Established), PIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range snap.Sockets {
		if int(s.Local.Port()) == port && s.PID == os.Getpid() && s.FD >= 0 {
			n++
		}
	}
	return n
}

// TestServerCapsConnections drives 40 clients that each scrape once and
// stay idle at a server capped at 4: it never holds more than 4, closes the
// longest idle to make room for each newcomer (so every one is answered),
// and a scrape after them all is answered at once.
func TestServerCapsConnections(t *testing.T) {
	s, addr := startServer(t, ServerOptions{MaxConns: 4})
	_, portText, _ := net.SplitHostPort(addr)
	var port int
	fmt.Sscan(portText, &port)
	type client struct {
		c net.Conn
		r *bufio.Reader
	}
	var clients []client
	for range 40 {
		c, r := scrapeOnce(t, addr)
		clients = append(clients, client{c, r})
		if n := heldBy(t, port); n > 4 {
			t.Fatalf("the server holds %d connections, above its cap of 4", n)
		}
	}
	// Each client past the fourth made room by closing the longest idle,
	// so all but the last three were closed.
	for i, cl := range clients[:37] {
		if err := waitClosed(cl.c, cl.r); err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	if got := s.Evicted(); got != 37 {
		t.Errorf("%d connections closed to make room, want 37", got)
	}
	c, _ := scrapeOnce(t, addr)
	c.Close()
}

// TestServerTimeouts: an idle keep-alive connection is closed after
// IdleTimeout, one that sends nothing after ReadTimeout, and one that does
// not read its response after WriteTimeout (a page larger than the
// sockets' buffers, whose write then fails). Each waits for the close, at
// most 30 s, with timeouts of 50 ms.
func TestServerTimeouts(t *testing.T) {
	_, addr := startServer(t, ServerOptions{IdleTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond})
	c, r := scrapeOnce(t, addr)
	if err := waitClosed(c, r); err != nil {
		t.Errorf("idle after a scrape: %v", err)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := waitClosed(silent, silent); err != nil {
		t.Errorf("connected and silent: %v", err)
	}

	// A page of 64 MiB that the client never reads.
	wrote := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 64 {
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ln, big, ServerOptions{WriteTimeout: 50 * time.Millisecond})
	go s.Serve()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	stalled, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := io.WriteString(stalled, "GET / HTTP/1.1\r\nHost: kdiag\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("64 MiB written to a client that reads nothing")
		}
	case <-time.After(30 * time.Second):
		t.Error("the write to a client that reads nothing still blocks after 30 s")
	}
}

// TestServerMakesRoomWhenAllBusy: when a newcomer finds every other
// connection serving a request, it waits in the accept queue; as soon as
// one of them goes idle it is closed to let the newcomer in, not after
// IdleTimeout (an hour here). Before, a flood of scrapes on a loaded
// machine could find all 64 busy, and the port then took no connection
// for 90 s.
func TestServerMakesRoomWhenAllBusy(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ln, h, ServerOptions{MaxConns: 4, IdleTimeout: time.Hour})
	go s.Serve()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	addr := ln.Addr().String()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// One at a time, each in the handler before the next connects: a
	// connection not yet serving is one to close to make room.
	for i := range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: kdiag\r\n\r\n")
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatalf("request %d not in the handler after 30 s", i+1)
		}
	}
	// Every slot is serving: the newcomer's request waits.
	got := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	close(release)
	if err := <-got; err != nil {
		t.Errorf("the newcomer, once the others went idle: %v", err)
	}
}

// TestServerKeepsTheNewcomer: the room made when a connection goes idle is
// for the newcomer that waited for it, so a later connection going idle
// closes itself (or another idle one), never the newcomer before it sends
// its request.
func TestServerKeepsTheNewcomer(t *testing.T) {
	release := map[string]chan struct{}{"/1": make(chan struct{}), "/2": make(chan struct{}), "/3": make(chan struct{}), "/4": make(chan struct{})}
	entered := make(chan struct{}, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ch := release[r.URL.Path]; ch != nil {
			entered <- struct{}{}
			<-ch
		}
		io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ln, h, ServerOptions{MaxConns: 4, IdleTimeout: time.Hour, ReadTimeout: time.Hour})
	go s.Serve()
	defer func() {
		for _, ch := range release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	addr := ln.Addr().String()
	port := ln.Addr().(*net.TCPAddr).Port
	var held []*bufio.Reader
	for i := 1; i <= 4; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: kdiag\r\n\r\n", i)
		held = append(held, bufio.NewReader(c))
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatalf("request %d not in the handler after 30 s", i)
		}
	}
	// The newcomer connects and waits in the accept queue, not sending yet.
	n, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.SetDeadline(time.Now().Add(time.Minute))
	// The first goes idle and is closed: the newcomer is taken in.
	close(release["/1"])
	deadline := time.Now().Add(30 * time.Second)
	for s.Evicted() < 1 || heldBy(t, port) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the newcomer not taken in after 30 s (%d closed, %d held)", s.Evicted(), heldBy(t, port))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The second goes idle: it makes room by closing itself, not the
	// newcomer, which has not sent its request yet.
	close(release["/2"])
	if resp, err := http.ReadResponse(held[1], nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the second's response: %v", err)
	}
	for s.Evicted() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d closed after 30 s, want 2", s.Evicted())
		}
		time.Sleep(10 * time.Millisecond)
	}
	io.WriteString(n, "GET / HTTP/1.1\r\nHost: kdiag\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(n), nil)
	if err != nil {
		t.Fatalf("the newcomer: %v", err)
	}
	resp.Body.Close()
}
