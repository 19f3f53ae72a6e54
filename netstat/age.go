package netstat

import "time"

// A repeated scan (Scanner without NoCache: kdiag watch, repro) asks the
// kernel for tcp_info (INET_DIAG_INFO) only every Scanner.InfoEvery, and
// only for the states whose age kdiag uses (ageStates: CLOSE_WAIT). tcp_info
// is filled per socket under its lock (tcp_get_info) and is most of a
// dump's kernel time; the dump without it is much cheaper. Between two such
// scans the age of a socket the last one saw is carried forward: the time
// it last received, as tcp_info implied (scan time - Age), stays that time,
// so its age now is the age then plus the time since. For a CLOSE_WAIT
// socket that is exactly the time since the FIN: nothing is received after
// it. (A keepalive ACK would reset tcp_info's age, so the carried-forward
// age is, if anything, the more right one.) A socket first seen, or seen in
// another state, between two tcp_info scans has HasAge false until the next
// one; the analyzer falls back on its first-seen time meanwhile.

// ageStates are the states a repeated scan asks tcp_info for: CLOSE_WAIT's
// age is the time since the FIN, what the analyzer and repro use. Other
// states' receive times say little and would cost tcp_info per socket.
const ageStates = StateSet(1 << CloseWait)

// DefaultInfoEvery is how often a repeated scan asks for tcp_info when
// Scanner.InfoEvery is 0.
const DefaultInfoEvery = 10 * time.Second

// ageRecord is what the tcp_info scans said of a socket: its namespace
// and state, the latest time it can have last received (the FIN, for
// CLOSE_WAIT) as an offset from ageCache.base, and how much earlier it may
// have been (Socket.AgeSpan, ms). It holds no pointer and takes 32 bytes,
// where a time.Time (with its *Location) made it 48 and made the garbage
// collector scan it: 20,000 CLOSE_WAIT sockets' records took 2.7 MB of a
// watch's heap in a map keyed by namespace and inode, 1.1 MB now.
type ageRecord struct {
	netns uint64
	recv  time.Duration
	span  uint32
	idle  uint32 // Socket.IdleMS
	gen   uint32 // the tcp_info scan that last saw it
	state State
}

// ageCache holds the receive times of the tcp_info scans, by inode. A
// socket's inode is unique across namespaces (sockfs numbers them all), so
// the namespace in the record only tells a fixture's reused inode from
// the socket recorded.
type ageCache struct {
	t inodeTable[ageRecord]
	// at is the time of the last tcp_info scan; zero before the first.
	at  time.Time
	gen uint32
	// base is the time ageRecord.recv counts from: the first tcp_info
	// scan's. Offsets from it keep the monotonic clock's differences, as
	// time.Time.Sub does.
	base time.Time
}

// since returns how long before at the record's receive time was.
func (c *ageCache) since(r ageRecord, at time.Time) time.Duration {
	return max(at.Sub(c.base)-r.recv, 0)
}

// due reports whether a scan at now must ask for tcp_info: the first, one
// every seconds, and one after the clock went back.
func (c *ageCache) due(now time.Time, every time.Duration) bool {
	return c.at.IsZero() || now.Sub(c.at) >= every || now.Before(c.at)
}

// record keeps the ages of socks, a scan at time at that asked tcp_info for
// the states in info, and forgets the sockets it did not see. Sockets of
// other states, and those without an inode (TIME_WAIT: no tcp_info either),
// are not kept. A socket seen in the same state before keeps what both
// scans say: its FIN came in both intervals, so in their intersection. A
// keepalive ACK after the first scan widens the second's interval, not the
// kept one, and a FIN time once known exactly stays exact.
func (c *ageCache) record(socks []Socket, at time.Time, info StateSet) {
	n := 0
	for i := range socks {
		if s := &socks[i]; info.Has(s.State) && s.HasAge && s.Inode != 0 {
			n++
		}
	}
	c.t.reserve(n)
	c.gen++
	c.at = at
	if c.base.IsZero() {
		c.base = at
	}
	for i := range socks {
		s := &socks[i]
		if !info.Has(s.State) || !s.HasAge || s.Inode == 0 {
			continue
		}
		r := ageRecord{netns: s.NetNS, state: s.State, recv: at.Sub(c.base) - s.Age, span: s.AgeSpan, idle: s.IdleMS, gen: c.gen}
		e, _ := c.t.put(s.Inode)
		if old := *e; old.gen != 0 && old.netns == r.netns && old.state == r.state {
			r = r.narrow(old)
			if r.idle == 0 {
				r.idle = old.idle // known while the age was exact
			}
			s.IdleMS = r.idle
			// This scan's socket gets the narrowed age too.
			s.Age, s.AgeSpan = c.since(r, at), r.span
		}
		*e = r
	}
	c.t.sweep(func(_ uint64, r *ageRecord) bool { return r.gen == c.gen })
}

// narrow intersects r's interval [recv-span, recv] with old's; when they do
// not meet (a reused inode), r stands.
func (r ageRecord) narrow(old ageRecord) ageRecord {
	ms := func(n uint32) time.Duration { return time.Duration(n) * time.Millisecond }
	latest := min(r.recv, old.recv)
	earliest := max(r.recv-ms(r.span), old.recv-ms(old.span))
	if earliest > latest {
		return r
	}
	r.recv = latest
	r.span = uint32((latest - earliest).Milliseconds())
	return r
}

// carry sets the ages of socks, a scan at time at without tcp_info, from
// the cache: a socket of a state in info that the last tcp_info scan saw in
// the same state gets the age it had then plus the time since; any other
// has HasAge false.
func (c *ageCache) carry(socks []Socket, at time.Time, info StateSet) {
	for i := range socks {
		s := &socks[i]
		s.Age, s.HasAge, s.AgeSpan, s.IdleMS = 0, false, 0, 0
		if !info.Has(s.State) || s.Inode == 0 {
			continue
		}
		if r, ok := c.t.get(s.Inode); ok && r.netns == s.NetNS && r.state == s.State {
			s.Age, s.HasAge, s.AgeSpan, s.IdleMS = c.since(*r, at), true, r.span, r.idle
		}
	}
}
