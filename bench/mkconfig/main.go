// Command mkconfig writes the large producer configurations bench/lint.sh
// times kdiag lint on: a file of N unknown keys (every one a KD404 finding
// with a did-you-mean search), or a file of about SIZE bytes of the
// settings people write (known keys, comments, a continued value, unknown
// keys with URLs for values, a password), each line's key made unique so
// that the file is not one key repeated.
//
//	mkconfig -keys 100000 > keys.properties
//	mkconfig -size 50000000 > big.properties
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
)

func main() {
	keys := flag.Int("keys", 0, "write this many unknown keys")
	size := flag.Int64("size", 0, "write about this many bytes of mixed settings")
	flag.Parse()
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	switch {
	case *keys > 0:
		fmt.Fprintln(w, "bootstrap.servers=kafka-1:9092,kafka-2:9092")
		for i := 0; i < *keys; i++ {
			fmt.Fprintf(w, "app.custom.setting.%d=value-%d\n", i, i)
		}
	case *size > 0:
		fmt.Fprintln(w, "bootstrap.servers=kafka-1:9092,kafka-2:9092")
		var n int64
		for i := 0; n < *size; i++ {
			var c int
			switch i % 8 {
			case 0:
				c, _ = fmt.Fprintf(w, "# tenant %d: endpoints and tuning\n", i)
			case 1:
				c, _ = fmt.Fprintf(w, "tenant.%d.endpoint.url=https://tenant-%d.internal.example.com:8443/api/v1/produce\n", i, i)
			case 2:
				c, _ = fmt.Fprintf(w, "tenant.%d.linger.ms = %d\n", i, i%100)
			case 3:
				c, _ = fmt.Fprintf(w, "tenant.%d.brokers=kafka-%d.example.com:9092,\\\n    kafka-%d.example.com:9092\n", i, i%7, (i+1)%7)
			case 4:
				c, _ = fmt.Fprintf(w, "tenant.%d.ssl.key.password=not-a-real-secret-%d\n", i, i)
			case 5:
				c, _ = fmt.Fprintf(w, "tenant.%d.description=caf\\u00e9 \\t tenant number %d\n", i, i)
			case 6:
				c, _ = fmt.Fprintf(w, "tenant.%d.connections.max.idle.ms:%d\n", i, 540000+i%1000)
			default:
				c, _ = fmt.Fprintf(w, "tenant.%d.compression.type=zstd\n", i)
			}
			n += int64(c)
		}
	default:
		fmt.Fprintln(os.Stderr, "mkconfig: give -keys N or -size BYTES")
		os.Exit(2)
	}
}
