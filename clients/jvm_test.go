package clients_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kdiag/kdiag/clients"
	"github.com/kdiag/kdiag/doctor"
	"github.com/kdiag/kdiag/internal/testio"
	"github.com/kdiag/kdiag/netstat"
)

// TestJVMNetworkThreads: the real KafkaProducer (kafka-clients 3.9.0, the
// driver of java_test.go) with two instances, the network thread of
// producer-1 polling and that of producer-2 blocked by a send callback
// that waits until the test releases it. doctor must count two instances,
// call the first polling and the second blocked, and say so.
func TestJVMNetworkThreads(t *testing.T) {
	c := startIdleBroker(t)
	j := startJava(t, "3.9.0", c.BootstrapServers(), 2)
	j.do("send 1")
	j.waitLine("acked 0")
	j.do("send-block 2")
	j.waitLine("blocking 1")
	pid := j.pid
	// Wait until both are parked where the test says (the selector in
	// epoll, the blocked one in its futex), with a bound.
	lib, _ := clients.Lookup(clients.KafkaClients)
	testio.WaitFor(t, 30*time.Second, "producer-1's network thread in epoll and producer-2's outside it", func() bool {
		ts, err := clients.ReadThreads("/proc", pid)
		if err != nil {
			t.Fatal(err)
		}
		th := clients.Classify(lib, [][]clients.ThreadSample{ts}, clients.HostArch)
		return len(th.Network) == 2 && th.Network[0].State == clients.Polling && th.Network[1].State == clients.Blocked
	})
	r, err := doctor.Run(context.Background(), doctor.Options{Query: netstat.Query{PIDs: []int{pid}}})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Processes[0]
	if p.Client.Library != clients.KafkaClients || p.Client.Version != "3.9.0" {
		t.Errorf("client %+v, want kafka-clients 3.9.0", p.Client)
	}
	if p.Instances == nil || *p.Instances != 2 {
		t.Errorf("instances %v, want 2", p.Instances)
	}
	if len(p.NetworkThreads) != 2 {
		t.Fatalf("network threads %+v, want 2", p.NetworkThreads)
	}
	// Threads are in TID order: producer-1's was started first.
	poll, stuck := p.NetworkThreads[0], p.NetworkThreads[1]
	if poll.Name != "kafka-producer-" || poll.State != clients.Polling || !clients.IsPoll(clients.HostArch, poll.Syscall) {
		t.Errorf("producer-1's network thread: %+v, want kafka-producer- (the 15 bytes Linux keeps), polling in an epoll call", poll)
	}
	if stuck.State != clients.Blocked || clients.IsPoll(clients.HostArch, stuck.Syscall) {
		t.Errorf("producer-2's network thread: %+v, want blocked outside any poll call", stuck)
	}
	var found bool
	for _, f := range p.Findings {
		if f.ID == "network-thread-blocked" && strings.Contains(f.Fix, "jstack") {
			found = true
		}
	}
	if !found {
		t.Errorf("findings %+v: want network-thread-blocked with the jstack fix", p.Findings)
	}
	j.do("release")
	j.waitLine("acked 1")
	j.do("close")
	j.waitLine("closed")
	t.Logf("JVM threads: %+v; findings %d", p.NetworkThreads, len(p.Findings))
}
