// The broker's side of every connection, from the embedded cluster's log:
// package broker logs each accept, request and close with the client's
// address, the node and, for a close, who closed it and after how long
// idle. That log is the record; this handler keeps it as events.

package repro

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kdiag/kdiag/broker"
)

// BrokerEvent is one thing the broker did with a connection.
type BrokerEvent struct {
	At   time.Time
	Kind string // "accepted", "request" or "closed"
	Node int32
	// Client is the client's address ("127.0.0.1:41234"), the broker's
	// "remote"; Broker the broker's own ("127.0.0.1:9092"), for accepts.
	Client string
	Broker string
	// Conn is the broker's connection id, Kafka's "local-remote-index":
	// two connections from the same client port have two.
	Conn string
	// API is a request's "Metadata (key 3) v12".
	API string
	// Reason, IdleFor and Age are a close's: who closed it, how long it
	// had carried nothing, and how long it had been open.
	Reason  broker.Reason
	IdleFor time.Duration
	Age     time.Duration
}

// brokerLog is a slog.Handler for the cluster's logger: it keeps the
// accept, request and close events, and hands every record its next
// handler wants on to it (kdiag repro --verbose's stderr).
type brokerLog struct {
	next  slog.Handler
	attrs []slog.Attr

	mu     *sync.Mutex
	events *[]BrokerEvent
}

func newBrokerLog(next slog.Handler) *brokerLog {
	return &brokerLog{next: next, mu: &sync.Mutex{}, events: &[]BrokerEvent{}}
}

// Enabled is true at every level: requests are logged at debug level, and
// they are what tells a connection in use from an idle one.
func (b *brokerLog) Enabled(context.Context, slog.Level) bool { return true }

func (b *brokerLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *b
	c.next = b.next.WithAttrs(as)
	c.attrs = append(append([]slog.Attr(nil), b.attrs...), as...)
	return &c
}

func (b *brokerLog) WithGroup(name string) slog.Handler {
	c := *b
	c.next = b.next.WithGroup(name)
	return &c
}

func (b *brokerLog) Handle(ctx context.Context, r slog.Record) error {
	var kind string
	switch r.Message {
	case "accepted connection":
		kind = "accepted"
	case "request":
		kind = "request"
	case "closed connection":
		kind = "closed"
	}
	if kind != "" {
		ev := BrokerEvent{At: r.Time, Kind: kind}
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "node":
				ev.Node = int32(a.Value.Int64())
			case "remote":
				ev.Client = a.Value.String()
			case "local":
				ev.Broker = a.Value.String()
			case "connection":
				ev.Conn = a.Value.String()
			case "api":
				ev.API = a.Value.String()
			case "reason":
				ev.Reason = broker.Reason(a.Value.String())
			case "idle_for":
				ev.IdleFor, _ = time.ParseDuration(a.Value.String())
			case "age":
				ev.Age, _ = time.ParseDuration(a.Value.String())
			}
			return true
		})
		b.mu.Lock()
		*b.events = append(*b.events, ev)
		b.mu.Unlock()
	}
	if b.next.Enabled(ctx, r.Level) {
		return b.next.Handle(ctx, r)
	}
	return nil
}

// snapshot returns the events so far, in the order logged. It shares the
// log's array rather than copying it at every sample: events are only ever
// appended, so the ones it returns are never written again, and its capped
// capacity keeps a caller's append off the log's own.
func (b *brokerLog) snapshot() []BrokerEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(*b.events)
	return (*b.events)[:n:n]
}
