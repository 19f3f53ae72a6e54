// Package producer is kdiag's reference producer: a Kafka producer whose
// network lifecycle follows the Java KafkaProducer's (DEVELOPERS.md, "What
// the Java producer does with TCP"), over the real Kafka protocol with
// franz-go's kmsg types, so that kdiag repro can make CLOSE_WAIT happen the
// way it happens to Java applications, and not happen when it should not.
//
// # Lifecycle
//
// New starts one network goroutine (the Java network thread with its
// NetworkClient), following kafka-clients 3.9.0 or 2.1.1 (Config.Model,
// kdiag.model; DEVELOPERS.md, "What the Java producer does with TCP", and
// the differential test in clients/): 3.9.0 connects at creation to one
// bootstrap server, the least loaded, for METADATA and INIT_PRODUCER_ID;
// 2.1.1 connects to nothing until the first send. Both connect only to the
// leaders they send to and to the least loaded node for metadata; refresh
// metadata every metadata.max.age.ms, after any disconnect and when a
// record's topic is unknown (the record fails after max.block.ms); and
// close at most one connection idle for connections.max.idle.ms per poll,
// whose timeout request.timeout.ms bounds. Close flushes, closes every
// connection and stops every goroutine.
//
// Records are batched per partition (linger.ms, batch.size) in RecordBatch
// v2 with its CRC-32C, partitioned as Java does (murmur2 of the key; sticky
// for keyless records, KIP-480), and sent in one PRODUCE request per leader
// with up to max.in.flight.requests.per.connection in flight; retriable
// errors are retried after retry.backoff.ms up to retries and
// delivery.timeout.ms. API versions are negotiated per connection: the
// highest both the broker and kmsg support.
//
// # Meeting the broker's FIN
//
// Config.Reader (kdiag.reader, WithReader) chooses:
//
//   - ReaderPoll: every connection has a reader goroutine reading at all
//     times, as Java's Selector keeps every channel registered for reads. A
//     FIN is read at once; the network goroutine closes the socket and marks
//     the node disconnected; the next send reconnects. No CLOSE_WAIT lingers.
//   - ReaderOnDemand: a connection is read only while a response is pending,
//     as Sarama, franz-go and kafka-go do. A broker-closed idle connection is
//     not noticed and its socket stays in CLOSE_WAIT until the next request
//     on it meets the closed peer (the response read gets EOF, or the write
//     fails); then the producer closes it, reconnects and retries.
//
// # Callbacks run on the network goroutine
//
// Send callbacks run on the network goroutine, one after another, as Java
// runs them on the Sender thread. A callback that blocks, or
// kdiag.callback.delay.ms (Config.CallbackDelay, slept before each
// callback), stalls that goroutine: meanwhile no response is processed, no
// FIN is handled and no socket is closed, even with ReaderPoll (the reader
// has read the EOF but waits to hand it over). This is the stalled-callback
// scenario of kdiag repro.
//
// # Logging
//
// Connection events are logged through log/slog in the words of the Java
// client's NetworkClient and Selector: "Initiating connection to node
// localhost:9093 (id: -2 rack: null) using address localhost/127.0.0.1",
// "Completed connection to node -2. Fetching API versions.", "Sending
// metadata request MetadataRequestData(...) to node ...", "Idle connection
// to node -1 disconnected.", "Connection with localhost/127.0.0.1 (channel
// -1) disconnected" (with a reason attribute: peer closed (EOF), write
// failed, ...). Like Java, "Node -1 disconnected." is at INFO and the rest
// at DEBUG.
//
// # Not implemented
//
// Transactions and PUSH_TELEMETRY. Also not implemented: TLS and SASL (security.protocol other than PLAINTEXT is
// ignored, so such a cluster cannot be reached), custom partitioners,
// interceptors and metrics reporters. Compression uses franz-go's codecs.
package producer
