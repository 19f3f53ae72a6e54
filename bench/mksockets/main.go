//go:build linux

// Command mksockets holds N CLOSE_WAIT and M ESTABLISHED TCP sockets on
// 127.0.0.x, spread over several processes, until it gets SIGINT/SIGTERM
// or -lifetime passes; then it and every process it started
// exit. bench/scan.sh uses it to time `kdiag scan` against `ss -p`.
//
// Layout (each process stays under -per-proc descriptors; the open-file limit
// is per process):
//
//   - "closer" processes listen on 127.0.0.2, .3, ...; each accepts and
//     half-closes (shutdown(SHUT_WR): the FIN a broker's idle timeout sends)
//     and keeps the connection, so its clients land in CLOSE_WAIT and stay
//     there. A fully closed server end would be an orphan in FIN_WAIT2 that
//     the kernel resets after net.ipv4.tcp_fin_timeout (60 s), taking the
//     client's CLOSE_WAIT with it;
//   - "holder" processes listen on 127.0.0.100, .101, ... and keep what they
//     accept: the server ends of the ESTABLISHED pairs;
//   - "client" processes connect and hold their ends.
//
// M ESTABLISHED sockets are M/2 connections with both ends held. Each
// listener takes at most -per-listener connections so the ephemeral ports
// (32768-60999 per destination) never run out.
//
// With -churn R it also starts a "churner" process that opens R connections
// a second to a listener of its own (-churn-addr, port 9999 by default: not
// a Kafka port, so that a watch of --port 9092 is not woken by it) and
// closes each after -churn-life; its listener half-closes every other
// connection it accepts, so half of them pass through CLOSE_WAIT, and
// closes its end once the client has. That is the connection churn of a
// busy host, for bench/soak.sh and the events benchmarks.
//
// It prints one line "READY closewait=N established=M pids=..." when every
// socket is in place.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	var (
		closeWait   = flag.Int("closewait", 1000, "CLOSE_WAIT sockets to hold")
		established = flag.Int("established", 0, "ESTABLISHED sockets to hold (both ends of M/2 connections)")
		perProc     = flag.Int("per-proc", 10000, "descriptors per process at most")
		perListener = flag.Int("per-listener", 10000, "connections per listener at most")
		lifetime    = flag.Duration("lifetime", 10*time.Minute, "exit after this long whatever happens")
		churn       = flag.Int("churn", 0, "connections a second a churner process opens and closes (0: none)")
		churnLife   = flag.Duration("churn-life", 5*time.Second, "how long each churned connection lives")
		churnAddr   = flag.String("churn-addr", "127.0.0.250:9999", "the churner's listen address")
		role        = flag.String("role", "", "internal: closer, holder, client or churner")
		addrs       = flag.String("addrs", "", "internal: listen or connect addresses, comma list")
		count       = flag.Int("n", 0, "internal: connections per address (client)")
	)
	flag.Parse()
	raiseNOFILE()
	var err error
	switch *role {
	case "":
		err = parent(*closeWait, *established, *perProc, *perListener, *lifetime, *churn, *churnLife, *churnAddr)
	case "churner":
		err = churner(*addrs, *count, *churnLife, *lifetime)
	case "closer", "holder":
		err = server(*role, strings.Split(*addrs, ","), *lifetime)
	case "client":
		err = client(strings.Split(*addrs, ","), *count, *lifetime)
	default:
		err = fmt.Errorf("unknown -role %q", *role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mksockets %s: %v\n", *role, err)
		os.Exit(1)
	}
}

// raiseNOFILE sets the soft open-file limit to the hard one.
func raiseNOFILE() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	}
}

// child is one started process and the line it printed when ready.
type child struct {
	cmd   *exec.Cmd
	ready chan string
}

func start(args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	// Dies with the parent, whatever kills the parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, ready: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				c.ready <- sc.Text()
			}
		}
		close(c.ready)
	}()
	return c, nil
}

func (c *child) wait(d time.Duration) error {
	select {
	case _, ok := <-c.ready:
		if !ok {
			return fmt.Errorf("pid %d exited before it was ready", c.cmd.Process.Pid)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("pid %d not ready after %v", c.cmd.Process.Pid, d)
	}
}

// split cuts n into parts of at most size.
func split(n, size int) []int {
	var out []int
	for n > 0 {
		k := min(n, size)
		out = append(out, k)
		n -= k
	}
	return out
}

func parent(closeWait, established, perProc, perListener int, lifetime time.Duration, churn int, churnLife time.Duration, churnAddr string) error {
	var children []*child
	defer func() {
		for _, c := range children {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	}()
	spawn := func(args ...string) (*child, error) {
		c, err := start(append(args, "-lifetime", lifetime.String())...)
		if err != nil {
			return nil, err
		}
		children = append(children, c)
		return c, nil
	}
	const readyWait = 2 * time.Minute
	var pids []string

	// CLOSE_WAIT: a closer process per listener on 127.0.0.2, .3, ...
	var cwAddrs []string
	var cwPer []int
	for i, k := range split(closeWait, min(perListener, perProc)) {
		cwAddrs = append(cwAddrs, fmt.Sprintf("127.0.0.%d:9092", 2+i))
		cwPer = append(cwPer, k)
	}
	for _, a := range cwAddrs {
		c, err := spawn("-role", "closer", "-addrs", a)
		if err != nil {
			return err
		}
		if err := c.wait(readyWait); err != nil {
			return err
		}
		pids = append(pids, strconv.Itoa(c.cmd.Process.Pid))
	}
	// ESTABLISHED: M/2 connections; holders on 127.0.0.100, .101, ...
	conns := established / 2
	var estAddrs []string
	var estPer []int
	for i, k := range split(conns, min(perListener, perProc)) {
		addr := fmt.Sprintf("127.0.0.%d:9092", 100+i)
		c, err := spawn("-role", "holder", "-addrs", addr)
		if err != nil {
			return err
		}
		if err := c.wait(readyWait); err != nil {
			return err
		}
		pids = append(pids, strconv.Itoa(c.cmd.Process.Pid))
		estAddrs = append(estAddrs, addr)
		estPer = append(estPer, k)
	}
	// Clients: fill processes up to perProc descriptors, one destination
	// (and count) at a time.
	type job struct {
		addr string
		n    int
	}
	var jobs []job
	for i, a := range cwAddrs {
		for _, k := range split(cwPer[i], perProc) {
			jobs = append(jobs, job{a, k})
		}
	}
	for i, a := range estAddrs {
		for _, k := range split(estPer[i], perProc) {
			jobs = append(jobs, job{a, k})
		}
	}
	var clients []*child
	for _, j := range jobs {
		c, err := spawn("-role", "client", "-addrs", j.addr, "-n", strconv.Itoa(j.n))
		if err != nil {
			return err
		}
		clients = append(clients, c)
		pids = append(pids, strconv.Itoa(c.cmd.Process.Pid))
	}
	for _, c := range clients {
		if err := c.wait(readyWait); err != nil {
			return err
		}
	}
	if churn > 0 {
		c, err := spawn("-role", "churner", "-addrs", churnAddr, "-n", strconv.Itoa(churn), "-churn-life", churnLife.String())
		if err != nil {
			return err
		}
		if err := c.wait(readyWait); err != nil {
			return err
		}
		pids = append(pids, strconv.Itoa(c.cmd.Process.Pid))
	}
	fmt.Printf("READY closewait=%d established=%d pids=%s\n", closeWait, conns*2, strings.Join(pids, ","))
	holdUntilDone(lifetime)
	return nil
}

// holdUntilDone returns on SIGINT/SIGTERM or after d. (Not on stdin EOF:
// a background job's stdin is /dev/null.)
func holdUntilDone(d time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case <-time.After(d):
	}
}

// server listens on addrs and keeps what it accepts; a closer half-closes
// it first. (The clients wait for their state, which the kernel reaches
// before accept for ESTABLISHED, so a holder only has to keep up.)
func server(role string, addrs []string, lifetime time.Duration) error {
	var mu sync.Mutex
	var held []net.Conn
	for _, a := range addrs {
		ln, err := noKeepAliveListen.Listen(context.Background(), "tcp4", a)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if role == "closer" {
					c.(*net.TCPConn).CloseWrite()
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	fmt.Println("ready")
	holdUntilDone(lifetime)
	mu.Lock()
	runtime.KeepAlive(held) // see client
	mu.Unlock()
	return nil
}

// client connects n times to each address and holds the connections; it is
// ready when the kernel shows every one ESTABLISHED or CLOSE_WAIT (the
// closer's FIN arrived).
func client(addrs []string, n int, lifetime time.Duration) error {
	var conns []*net.TCPConn
	for _, a := range addrs {
		for range n {
			c, err := noKeepAliveDial.Dial("tcp4", a)
			if err != nil {
				return fmt.Errorf("connect %s (%d held): %w", a, len(conns), err)
			}
			conns = append(conns, c.(*net.TCPConn))
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, c := range conns {
		want := unix.BPF_TCP_CLOSE_WAIT
		if isHolderAddr(c.RemoteAddr().String()) {
			want = unix.BPF_TCP_ESTABLISHED
		}
		for {
			st, err := tcpState(c)
			if err != nil {
				return err
			}
			if st == want {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: state %d, not %d, after 1m", c.LocalAddr(), st, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Println("ready")
	holdUntilDone(lifetime)
	// Without this the connections are garbage once the wait starts, and
	// the finalizers of their netFDs close them at the next GC.
	runtime.KeepAlive(conns)
	return nil
}

// Go turns TCP keepalive on for every connection (15 s idle, 9 probes 15 s
// apart). Tens of thousands of sockets made at once send their probes at
// once; loopback queues them on a per-CPU backlog of
// net.core.netdev_max_backlog (1000) packets and drops the rest, and after 9
// unanswered probes the kernel resets the connection: every socket would be
// gone 2.5 minutes in. Idle connections with no keepalive stay forever.
var (
	noKeepAliveDial   = net.Dialer{Timeout: 10 * time.Second, KeepAlive: -1}
	noKeepAliveListen = net.ListenConfig{KeepAlive: -1}
)

// isHolderAddr: holders listen on 127.0.0.100 and up.
func isHolderAddr(a string) bool {
	host, _, _ := net.SplitHostPort(a)
	ip := net.ParseIP(host).To4()
	return ip != nil && ip[3] >= 100
}

func tcpState(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st int
	var gerr error
	err = rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if gerr == nil {
			st = int(info.State)
		}
	})
	return st, errors.Join(err, gerr)
}

// churner listens on addr and, rate times a second, connects to itself and
// closes each connection life later. Its listener half-closes every other
// connection it accepts (the client's end then sits in CLOSE_WAIT until it
// closes), reads each to EOF and closes it: nothing is left behind.
func churner(addr string, rate int, life, lifetime time.Duration) error {
	ln, err := noKeepAliveListen.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if n%2 == 0 {
					c.(*net.TCPConn).CloseWrite()
				}
				var b [64]byte
				for {
					if _, err := c.Read(b[:]); err != nil {
						return
					}
				}
			}()
		}
	}()
	type live struct {
		c    net.Conn
		dies time.Time
	}
	var open []live
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.After(lifetime)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fmt.Println("ready")
	for {
		select {
		case <-sig:
			return nil
		case <-end:
			return nil
		case now := <-tick.C:
			for len(open) > 0 && now.After(open[0].dies) {
				open[0].c.Close()
				open = open[1:]
			}
			c, err := noKeepAliveDial.Dial("tcp4", addr)
			if err != nil {
				continue // a refused or slow connect is churn too
			}
			open = append(open, live{c, now.Add(life)})
		}
	}
}
