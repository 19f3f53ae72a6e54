package config

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchProperties is a producer.properties of n settings with the syntax
// people use (separators, a continuation, escapes, comments).
func benchProperties(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "# setting %d\nkey.number.%d=value-%d\n", i, i, i)
		case 1:
			fmt.Fprintf(&b, "key.number.%d : host-%d:9092,\\\n    other-%d:9092\n", i, i, i)
		case 2:
			fmt.Fprintf(&b, "  key.number.%d   caf\\u00e9 \\t %d\n", i, i)
		default:
			fmt.Fprintf(&b, "key\\=number.%d=%d\n", i, i)
		}
	}
	return b.Bytes()
}

func BenchmarkParseProperties(b *testing.B) {
	data := benchProperties(1000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseProperties("bench", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSpringYAML(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("spring:\n  kafka:\n    bootstrap-servers: [a:9092, b:9092]\n    producer:\n      acks: all\n      properties:\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&sb, "        \"[key.number.%d]\": %d\n", i, i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseSpringYAML("bench.yml", data); err != nil {
			b.Fatal(err)
		}
	}
}
