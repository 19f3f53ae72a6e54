package producer

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkProduce measures Send-to-callback throughput of 100-byte records
// against kfake on loopback (acks=all, linger.ms=5, one partition).
func BenchmarkProduce(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cfg, err := ParseConfig(map[string]string{"bootstrap.servers": strings.Join(c.ListenAddrs(), ",")})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	val := make([]byte, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.SetBytes(int64(len(val)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Send(ctx, Record{Topic: "bench", Value: val}, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if st := p.Stats(); st.RecordsFailed != 0 {
		b.Fatalf("%d records failed", st.RecordsFailed)
	}
}
