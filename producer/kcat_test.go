package producer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKcatReadsBack has librdkafka (kcat), an implementation independent
// of franz-go, consume what the producer wrote: keys, values and headers.
func TestKcatReadsBack(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (Debian package kcat)")
	}
	c := newCluster(t, 1, kfake.SeedTopics(1, "kcat"))
	p, _ := newProducer(t, c, nil)
	type rec struct {
		Key     string   `json:"key"`
		Payload string   `json:"payload"`
		Headers []string `json:"headers"`
	}
	var want []rec
	for i := 0; i < 5; i++ {
		r := Record{Topic: "kcat", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("value %d", i)),
			Headers: []Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}}
		if err := p.Send(context.Background(), r, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec{Key: string(r.Key), Payload: string(r.Value), Headers: []string{"n", fmt.Sprint(i)}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", c.ListenAddrs()[0], "-t", "kcat", "-o", "beginning", "-e", "-J",
		"-X", "check.crcs=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	var got []rec
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r rec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		got = append(got, r)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kcat read back (-want +got):\n%s\nstderr: %s", diff, stderr.String())
	}
}
