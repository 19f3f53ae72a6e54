package producer_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/kdiag/kdiag/producer"
	"github.com/twmb/franz-go/pkg/kfake"
)

func Example() {
	// A one-broker cluster on 127.0.0.1 to produce to.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	cfg, err := producer.ParseConfig(map[string]string{
		"bootstrap.servers":       strings.Join(cluster.ListenAddrs(), ","),
		"connections.max.idle.ms": "-1",        // never close idle connections: the broker will
		"kdiag.reader":            "on-demand", // and its FIN stays unread: CLOSE_WAIT
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.Send(ctx, producer.Record{Topic: "orders", Key: []byte("id-1"), Value: []byte("hello")},
		func(md producer.RecordMetadata, err error) {
			if err != nil {
				fmt.Println("failed:", err)
				return
			}
			fmt.Printf("delivered to %s-%d@%d\n", md.Topic, md.Partition, md.Offset)
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	st := p.Stats()
	fmt.Println("acked:", st.RecordsAcked, "open connections:", st.ConnectionsOpen)
	// Output:
	// delivered to orders-0@0
	// acked: 1 open connections: 0
}
