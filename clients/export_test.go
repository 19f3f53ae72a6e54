package clients

// What the external tests (package clients_test) check of the package's
// unexported tables.
var (
	ProduceValueFlags = produceValueFlags
	BrokerValueFlags  = brokerValueFlags
	ReproValueFlags   = reproValueFlags
	BrokerDefaultIdle = brokerDefaultIdle
)
