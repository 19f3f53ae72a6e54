// Command leaker is a test helper (built by the watch tests, and by
// scripts/record-leak.sh for the recordings in testdata): a process whose
// CLOSE_WAIT sockets grow, hold and drain on command, the way a Kafka client
// that never reads idle connections leaks them when the broker closes.
//
// It listens on 127.0.0.1 with a server that closes every connection it
// accepts (the broker closing idle connections), and a second that keeps
// them open. Commands, one per line on stdin, each answered by one line on
// stdout once done:
//
//	open N    dial N connections the server closes: N more CLOSE_WAIT
//	          (the client never reads, so the FIN stays unread: Recv-Q 1)
//	est N     dial N connections the server keeps: N more ESTABLISHED
//	close N   close the N oldest CLOSE_WAIT connections
//	count     print how many of each it holds
//
// EOF on stdin, or -lifetime passing, closes everything and exits, so a
// test that dies leaves nothing behind.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	lifetime := flag.Duration("lifetime", 2*time.Minute, "exit after this long even if stdin stays open")
	closePort := flag.Int("close-port", 0, "port of the closing listener (0: any free port)")
	flag.Parse()
	if err := run(*lifetime, *closePort); err != nil {
		fmt.Fprintln(os.Stderr, "leaker:", err)
		os.Exit(1)
	}
}

func run(lifetime time.Duration, closePort int) error {
	closing, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", closePort))
	if err != nil {
		return err
	}
	keeping, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	closed := make(chan struct{}, 1024)
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Close() // the FIN the client never reads
			closed <- struct{}{}
		}
	}()
	var kept []net.Conn
	go func() {
		for {
			c, err := keeping.Accept()
			if err != nil {
				return
			}
			kept = append(kept, c) // only this goroutine appends; freed at exit
		}
	}()
	time.AfterFunc(lifetime, func() { os.Exit(2) })

	var cw, est []net.Conn
	fmt.Printf("ready pid=%d close=%s keep=%s\n", os.Getpid(), closing.Addr(), keeping.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		n := 0
		if len(f) > 1 {
			n, _ = strconv.Atoi(f[1])
		}
		switch f[0] {
		case "open":
			for range n {
				c, err := net.Dial("tcp4", closing.Addr().String())
				if err != nil {
					return err
				}
				cw = append(cw, c)
				<-closed
			}
			// The server's close is sent; give the FIN a moment to land
			// so the reply means "in CLOSE_WAIT" (loopback: microseconds).
			time.Sleep(20 * time.Millisecond)
		case "est":
			for range n {
				c, err := net.Dial("tcp4", keeping.Addr().String())
				if err != nil {
					return err
				}
				est = append(est, c)
			}
		case "close":
			n = min(n, len(cw))
			for _, c := range cw[:n] {
				c.Close()
			}
			cw = cw[n:]
		case "count":
		default:
			fmt.Printf("error unknown command %q\n", f[0])
			continue
		}
		fmt.Printf("ok close_wait=%d established=%d\n", len(cw), len(est))
	}
	return nil
}
