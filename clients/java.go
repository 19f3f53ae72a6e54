package clients

// What the Java client does with its connections, by version: the facts
// read at the apache/kafka tags, and what kafka-clients 2.1.1 and 3.9.0
// (built from those tags) did against kdiag broker.

// How the Java client's rows were measured: the jars built from the
// apache/kafka tags (javac alone), run against kdiag broker --brokers 3
// --idle 3s on loopback, their sockets read with ss -tanpo every 0.5 s
// beside NetworkClient's DEBUG log, 2026-12-05.
const (
	java21How = "kafka-clients built from apache/kafka 2.1.1 (21234bee3116), ss -tanpo every 0.5 s and NetworkClient's DEBUG log, 2026-12-05"
	java39How = "kafka-clients built from apache/kafka 3.9.0-rc3 (dd5272687e8a), ss -tanpo every 0.5 s and NetworkClient's DEBUG log, 2026-12-05"
)

// javaMeasured is what was measured of the Java client by hand, per
// version, that kdiag repro -- CMD does not show: its idle timeout below
// the broker's (the driven closes do not wait for it). Its polling and
// blocked rows come from measured.json (clients/repro_test.go).
var javaMeasured = []Measurement{
	{Version: "2.1.1", How: java21How, Setup: "connections.max.idle.ms=2000 against the broker's 3000", HoldsCloseWait: false,
		Result: "the broker still closed all 8 connections first; each FIN was read at once"},
	{Version: "3.9.0", How: java39How, Setup: "connections.max.idle.ms=2000 against the broker's 3000", HoldsCloseWait: false,
		Result: "the client closed 1 connection, the broker 7 of 8 first (one expired connection closed per poll); each FIN was read at once"},
}

// javaLifecycle is the Java client's connections from start-up on, per
// version, each fact read at that version's tag.
var javaLifecycle = []VersionFact{
	{Versions: "2.1.1", Topic: "start-up", Fact: Fact{
		Says: "no connection at creation: KafkaProducer marks the bootstrap metadata fresh (Metadata.update with Cluster.bootstrap), so the first METADATA waits for the first send() (waitOnMetadata requests an update) or metadata.max.age.ms. Then every bootstrap server is contacted: while a new connection waits for its ApiVersions response (CHECKING_API_VERSIONS, which is not \"connecting\"), leastLoadedNode picks another node with no request in flight and maybeUpdate connects to it (measured: node ids -2, -1 of 2 servers, -3, -2, -1 of 3)",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/KafkaProducer.java, clients/NetworkClient.java, clients/ClusterConnectionStates.java",
			Symbol: "KafkaProducer constructor (metadata.update(Cluster.bootstrap(...))), waitOnMetadata; leastLoadedNode, DefaultMetadataUpdater.maybeUpdate, isAnyNodeConnecting; isConnecting", Commit: kafka21Commit, Tag: kafka21Tag}}},
	{Versions: "3.9.0", Topic: "start-up", Fact: Fact{
		Says: "one bootstrap node at creation: Metadata.bootstrap asks for a full update, so the Sender sends METADATA (topics=[]) at once, to the node leastLoadedNode picks; it prefers a node whose connection is being prepared (connecting or checking API versions) to a new one, so no other bootstrap server is contacted for it. Idempotence is on by default (enable.idempotence=true): InitProducerId follows; and enable.metrics.push=true makes TelemetrySender request GetTelemetrySubscriptions (KIP-714), for which it opened a second bootstrap connection (measured: a third listed server was never contacted)",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/Metadata.java, clients/NetworkClient.java, clients/ClusterConnectionStates.java, clients/producer/ProducerConfig.java, clients/producer/internals/Sender.java",
			Symbol: "Metadata.bootstrap (needFullUpdate = true); leastLoadedNode (foundConnecting), TelemetrySender.maybeUpdate; isPreparingConnection; ENABLE_IDEMPOTENCE_CONFIG, ENABLE_METRICS_PUSH_CONFIG; bumpIdempotentEpochAndResetIdIfNeeded", Commit: kafka39Commit, Tag: kafka39Tag}}},
	{Versions: "2.1.1 and 3.9.0", Topic: "after metadata", Fact: Fact{
		Says:   "connects only to the leaders of the partitions it sends to, when it sends to them (measured at both versions: never to every broker the metadata lists)",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/internals/Sender.java", Symbol: "sendProducerData: accumulator.ready, client.ready(node)", Commit: kafka39Commit, Tag: kafka39Tag}},
		Also: []Source{{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/internals/Sender.java", Symbol: "sendProducerData: accumulator.ready, client.ready(node)", Commit: kafka21Commit, Tag: kafka21Tag}}},
	{Versions: "2.1.1 and 3.9.0", Topic: "idle expiry", Fact: Fact{
		Says:   "Selector.poll closes at most one expired connection (maybeCloseOldestConnection, after the select), and NetworkClient.poll's timeout is the smallest of the caller's, the metadata update's (and at 3.9 telemetry's) and request.timeout.ms: not the idle deadline. So with connections.max.idle.ms below the broker's, the broker still closes most idle connections first",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/common/network/Selector.java, clients/NetworkClient.java", Symbol: "Selector.poll, maybeCloseOldestConnection, IdleExpiryManager.pollExpiredConnection; NetworkClient.poll (selector.poll(Utils.min(...)))", Commit: kafka39Commit, Tag: kafka39Tag}},
		Also: []Source{{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/common/network/Selector.java, clients/NetworkClient.java", Symbol: "Selector.poll, maybeCloseOldestConnection, IdleExpiryManager.pollExpiredConnection; NetworkClient.poll (selector.poll(Utils.min(...)))", Commit: kafka21Commit, Tag: kafka21Tag}}},
	{Versions: "2.1.1", Topic: "after the broker's close", Fact: Fact{
		Says:   "the disconnect requests a metadata update, and the metadata request opens a new connection: while idle, a reconnect about every broker idle period",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/NetworkClient.java", Symbol: "handleDisconnections (metadataUpdater.requestUpdate)", Commit: kafka21Commit, Tag: kafka21Tag}}},
	{Versions: "3.9.0", Topic: "after the broker's close", Fact: Fact{
		Says:   "the disconnect requests a metadata update, and the metadata request opens a new connection: while idle, a reconnect about every broker idle period",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/NetworkClient.java", Symbol: "processDisconnection, DefaultMetadataUpdater.handleServerDisconnect (metadata.requestUpdate)", Commit: kafka39Commit, Tag: kafka39Tag}}},
	{Versions: "2.1.1 and 3.9.0", Topic: "callbacks", Fact: Fact{
		Says: "send callbacks run on the network thread when a batch completes (ProducerBatch.completeFutureAndFireCallbacks), interceptors' onAcknowledgement with them; the Callback javadoc: \"will generally execute in the background I/O thread so it should be fast\". While one runs, the thread does not poll: no FIN is read",
		Source: Source{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/internals/ProducerBatch.java, clients/producer/Callback.java, clients/producer/KafkaProducer.java",
			Symbol: "completeFutureAndFireCallbacks; Callback.onCompletion; AppendCallbacks.onCompletion (interceptors.onAcknowledgement)", Commit: kafka39Commit, Tag: kafka39Tag}},
		Also: []Source{{Repo: "apache/kafka", Path: "clients/src/main/java/org/apache/kafka/clients/producer/internals/ProducerBatch.java, clients/producer/Callback.java, clients/producer/KafkaProducer.java",
			Symbol: "completeFutureAndFireCallbacks; Callback.onCompletion; InterceptorCallback.onCompletion (interceptors.onAcknowledgement)", Commit: kafka21Commit, Tag: kafka21Tag}}},
}
