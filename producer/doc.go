// Package producer is kdiag's reference producer: a Kafka producer whose
// network lifecycle follows the Java KafkaProducer's (DEVELOPERS.md, "What
// the Java producer does with TCP"), over the real Kafka protocol with
// franz-go's kmsg types, so that kdiag repro can make CLOSE_WAIT happen the
// way it happens to Java applications, and not happen when it should not.
//
// # Lifecycle
//
// New starts one network goroutine (the Java Sender thread with its
// NetworkClient). It connects to every bootstrap server as nodes -1, -2, ...,
// sends APIVERSIONS first on each connection and METADATA to the least
// loaded ready one; after the first metadata response it connects to every
// broker it lists (nodes 0, 1, ...). It connects where it must send and has
// no connection; it refreshes metadata every metadata.max.age.ms, after any
// disconnect (NetworkClient.processDisconnection requests an update, as
// Java does) and when a record's topic is unknown (the record waits, and
// fails after delivery.timeout.ms). It closes connections idle for
// connections.max.idle.ms; a negative value never does, so the broker's own
// idle timeout closes them (a passive close for the client). Close flushes,
// closes every connection and stops every goroutine.
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
// Idempotence and transactions: batches carry no producer ID (-1) and no
// sequence numbers; enable.idempotence defaults to false here (Java: true)
// and true is accepted with a log line, because the connection lifecycle,
// which is what kdiag reproduces, does not depend on it. Also not
// implemented: TLS and SASL (security.protocol other than PLAINTEXT is
// ignored, so such a cluster cannot be reached), custom partitioners,
// interceptors and metrics reporters. Compression uses franz-go's codecs.
package producer
