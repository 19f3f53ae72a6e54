package broker

// The broker's resident memory under the loads of issue 30, measured in a
// child process (child_test.go) with no limit: its peak RSS (VmHWM) is
// reported as peak-MB. BENCHMARKS.md has the figures, before and after.
//
//	go test -run '^$' -bench PeakRSS -benchtime 1x ./broker/

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reportPeakRSS reports the child's peak RSS, in MB.
func reportPeakRSS(b *testing.B, cb *childBroker) {
	b.Helper()
	rss, err := cb.peakRSS()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rss)/1e6, "peak-MB")
}

// BenchmarkPeakRSS200Frames: 200 connections each hold all but the last
// byte of a 1 MiB Produce frame, then end them (TestQueuedRequestBytesAreBounded's
// first load), against a broker with the default bounds.
func BenchmarkPeakRSS200Frames(b *testing.B) {
	frame := produceFrame(b, 1<<20)
	for range b.N {
		cb := startChild(b, "--data=unlimited", Config{Brokers: 1})
		for _, err := range sendTogether(b, cb, frame, 200) {
			if err != nil {
				cb.failed(b, "200 frames", err)
			}
		}
		cb.alive(b, "after 200 frames")
		reportPeakRSS(b, cb)
	}
}

// BenchmarkPeakRSSProduce500MB: franz-go produces 500 MB (5000 records of
// 100 KB of random bytes, uncompressed) to a topic of three partitions on
// the default three brokers, whose retention is the default.
func BenchmarkPeakRSSProduce500MB(b *testing.B) {
	payload := make([]byte, 100_000)
	rng := rand.New(rand.NewPCG(30, 3))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	for range b.N {
		cb := startChild(b, "--data=unlimited", Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cl, err := kgo.NewClient(kgo.SeedBrokers(cb.addr), kgo.DefaultProduceTopic("bench"), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(2*time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		for sent := 0; sent < 5000; sent += 500 {
			rs := make([]*kgo.Record, 500)
			for i := range rs {
				rs[i] = &kgo.Record{Value: payload}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				cb.alive(b, fmt.Sprintf("after %d MB", sent/10))
				b.Fatal(err)
			}
		}
		cl.Close()
		cancel()
		cb.alive(b, "after 500 MB")
		reportPeakRSS(b, cb)
	}
}
