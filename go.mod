module github.com/kdiag/kdiag

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/google/go-cmp v0.7.0
	github.com/magiconair/properties v1.18.13
	github.com/mdlayher/netlink v1.11.2
	github.com/olekukonko/tablewriter v1.1.5
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.74.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/shirou/gopsutil/v4 v4.26.10
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	github.com/twmb/franz-go v1.22.3
	// kfake is pinned to a pseudo-version because it has no tagged release:
	// the module proxy lists no version of github.com/twmb/franz-go/pkg/kfake,
	// and @latest resolves to this commit (01f206a7e32c, 2026-09-18). broker/
	// relies on its ListenFn, ControlKey and DropControl and on the API
	// versions it serves (TestKfakeVersionsAreKfakes pins a few). Move it for
	// a kfake fix that broker/ works around today: client_conn.go's nil
	// RequestForKey for an unknown key and uncapped make([]byte, size)
	// (guarded by broker/frame.go), Metadata v0-3 not auto-creating topics
	// and a control function's lastReq map that never forgets a connection
	// (broker.go's legacyMetadataControl); or when franz-go's kgo and kmsg
	// move on. Then run go test ./broker/ with kcat and python3-kafka.
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/mod v0.43.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/clipperhouse/displaywidth v0.10.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.6.0 // indirect
	github.com/ebitengine/purego v0.11.2 // indirect
	github.com/fatih/color v1.18.0 // indirect
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/lufia/plan9stats v0.0.0-20211012122336-39d0f177ccd0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mattn/go-runewidth v0.0.19 // indirect
	github.com/mdlayher/socket v0.6.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/olekukonko/cat v0.0.0-20250911104152-50322a0618f6 // indirect
	github.com/olekukonko/errors v1.2.0 // indirect
	github.com/olekukonko/ll v0.1.6 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/power-devops/perfstat v0.0.0-20260805114148-88456608a4f6 // indirect
	github.com/tklauser/go-sysconf v0.4.0 // indirect
	github.com/tklauser/numcpus v0.12.0 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
