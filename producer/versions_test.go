package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestVersions produces against clusters that speak older protocol
// versions (kfake capped at a Kafka release): ApiVersions falls back from v4
// through UNSUPPORTED_VERSION, Produce and Metadata go below their flexible
// versions, and the records still read back, compressed or not. (kfake
// serves Produce from v3, the first with RecordBatch v2.)
func TestVersions(t *testing.T) {
	tests := []struct {
		name        string
		versions    *kversion.Versions
		compression string
		wantLog     string
	}{
		{"kafka 4.0 zstd", kversion.V4_0_0(), "zstd", "Produce(0): 3 to 12 [usable: 11]"},
		{"kafka 2.4 gzip", kversion.V2_4_0(), "gzip", "ApiVersions(18): 0 to 3 [usable: 3]"},
		{"kafka 2.1 lz4", kversion.V2_1_0(), "lz4", "Produce(0): 3 to 7 [usable: 7]"},
		{"kafka 0.11 snappy", kversion.V0_11_0(), "snappy", "Produce(0): 3 to 3 [usable: 3]"},
		{"kafka 3.9 none", kversion.V3_9_0(), "none", "Metadata(3): 0 to 12 [usable: 12]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 1, kfake.MaxVersions(tt.versions), kfake.SeedTopics(1, "v"))
			p, logs := newProducer(t, c, map[string]string{"compression.type": tt.compression})
			for i := 0; i < 3; i++ {
				if _, err := produceSync(t, p, Record{Topic: "v", Key: []byte("k"), Value: []byte(fmt.Sprintf("value %d %0100d", i, i))}); err != nil {
					t.Fatal(err)
				}
			}
			if logs.index(tt.wantLog) < 0 {
				t.Errorf("no %q in the API versions log", tt.wantLog)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("v"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MaxVersions(tt.versions))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []string
			for len(got) < 3 && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			for i, v := range got {
				if want := fmt.Sprintf("value %d %0100d", i, i); v != want {
					t.Errorf("record %d = %q", i, v)
				}
			}
			if len(got) != 3 {
				t.Errorf("read back %d records, want 3", len(got))
			}
		})
	}
}

// TestMetadataMaxAge: metadata is refreshed every metadata.max.age.ms.
func TestMetadataMaxAge(t *testing.T) {
	c := newCluster(t, 1, kfake.SeedTopics(1, "t"))
	p, _ := newProducer(t, c, map[string]string{"metadata.max.age.ms": "100"})
	waitFor(t, "5 metadata requests", func() bool { return p.Stats().MetadataRequests >= 5 })
}
