// Shutdown: what Close leaves the network goroutine to do.

package producer

import "time"

// shutdown fails what is left, closes every connection and waits for the
// reader and dialer goroutines.
func (s *sender) shutdown() {
	s.stopping = true
	now := time.Now()
	for _, c := range s.sortedConns() {
		// A socket the broker closed first is the broker's close, even
		// when no reader saw its FIN (on-demand, or a callback that held
		// the network goroutine until this Close): counting it as the
		// client's would tell the user the opposite of what happened.
		why := closeShutdown
		if c.nc != nil && peerClosed(c.nc) {
			why = closePeerEOF
		}
		s.closeConn(c, why, nil, now)
	}
	recs, _ := s.p.takeIncoming()
	for _, pr := range recs {
		s.complete(pr, RecordMetadata{Topic: pr.topic, Partition: -1, Offset: -1}, ErrClosed)
	}
	for _, list := range s.waiting {
		for _, pr := range list {
			s.complete(pr, RecordMetadata{Topic: pr.topic, Partition: -1, Offset: -1}, ErrClosed)
		}
	}
	s.waiting = nil
	for _, q := range s.batches {
		for _, b := range q {
			s.failBatch(b, ErrClosed)
		}
	}
	s.batches = nil
	s.p.cancel()
	// Dialers and readers end on their own once their conn is closed; drain
	// events so none blocks on the channel meanwhile.
	done := make(chan struct{})
	go func() { s.p.wg.Wait(); close(done) }()
	for {
		select {
		case ev := <-s.p.events:
			if ev.nc != nil {
				ev.nc.Close()
			}
		case <-done:
			s.p.log.Debug("Kafka producer I/O thread has shut down")
			return
		}
	}
}
