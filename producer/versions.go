// API versions: the keys this producer speaks, the APIVERSIONS exchange
// that opens every connection, and the version chosen per request.

package producer

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka API keys this producer speaks (the Kafka protocol's ApiKeys).
const (
	keyProduce        int16 = 0
	keyMetadata       int16 = 3
	keyAPIVersions    int16 = 18
	keyInitProducerID int16 = 22
	keyGetTelemetry   int16 = 71
)

// modelVersions are the highest versions each model's client speaks, per
// API key: what kafka-clients 2.1.1 and 3.9.0 sent to kdiag's broker
// (../shared/java-clients/README.md, and the differential test in
// clients/), which is each version's ApiKeys latest. A key a model does
// not list, it does not send.
var modelVersions = map[Model]map[int16]int16{
	ModelJava21: {keyAPIVersions: 2, keyMetadata: 7, keyProduce: 7},
	ModelJava39: {keyAPIVersions: 4, keyMetadata: 12, keyProduce: 11, keyInitProducerID: 5, keyGetTelemetry: 0},
}

// apiVersions sends APIVERSIONS (key 18), the first request on every
// connection, and records the broker's versions.
func (s *sender) apiVersions(c *conn, v int16, now time.Time) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName = "kdiag"
	req.ClientSoftwareVersion = softwareVersion()
	s.request(c, req, now, func(r kmsg.Response, err error) {
		if err != nil {
			return // the connection is closed already
		}
		resp := r.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && v > 0 {
			next := int16(0)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == keyAPIVersions {
					next = min(k.MaxVersion, v-1)
				}
			}
			s.apiVersions(c, next, time.Now())
			return
		}
		if resp.ErrorCode != 0 {
			s.p.log.Warn(fmt.Sprintf("Received error %s from node %d when making an ApiVersionsRequest. Disconnecting.",
				errName(resp.ErrorCode), c.node.ID))
			s.closeConn(c, closeProtocol, kerr.ErrorForCode(resp.ErrorCode), time.Now())
			return
		}
		c.versions = map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			c.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		c.state = stateReady
		s.nodes[c.node.ID].failures = 0
		var desc []string
		for _, k := range []int16{keyProduce, keyMetadata, keyAPIVersions} {
			r, ok := c.versions[k]
			if !ok {
				desc = append(desc, fmt.Sprintf("%s(%d): UNSUPPORTED", kmsg.NameForKey(k), k))
				continue
			}
			use, _ := s.version(c, k, 0)
			desc = append(desc, fmt.Sprintf("%s(%d): %d to %d [usable: %d]", kmsg.NameForKey(k), k, r[0], r[1], use))
		}
		s.p.log.Debug(fmt.Sprintf("Recorded API versions for node %d: (%s)", c.node.ID, strings.Join(desc, ", ")))
	})
}

// version is the highest version of key both sides support, at least min:
// the broker's, the model's (modelVersions) and what kmsg can encode.
func (s *sender) version(c *conn, key int16, minV int16) (int16, bool) {
	r, ok := c.versions[key]
	if !ok {
		return 0, false
	}
	mv, ok := modelVersions[s.cfg().Model][key]
	if !ok {
		return 0, false
	}
	var kmax int16
	switch key {
	case keyProduce:
		kmax = (&kmsg.ProduceRequest{}).MaxVersion()
	case keyMetadata:
		kmax = (&kmsg.MetadataRequest{}).MaxVersion()
	case keyAPIVersions:
		kmax = (&kmsg.ApiVersionsRequest{}).MaxVersion()
	case keyInitProducerID:
		kmax = (&kmsg.InitProducerIDRequest{}).MaxVersion()
	case keyGetTelemetry:
		kmax = (&kmsg.GetTelemetrySubscriptionsRequest{}).MaxVersion()
	}
	v := min(r[1], kmax, mv)
	if v < r[0] || v < minV {
		return 0, false
	}
	return v, true
}

// softwareVersion is ApiVersions v3's ClientSoftwareVersion: the module
// version kdiag was built as, or "devel"; it must match
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func softwareVersion() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = strings.TrimPrefix(bi.Main.Version, "v")
	}
	ok := len(v) > 0
	for i, r := range v {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (r != '-' && r != '.' || i == 0 || i == len(v)-1) {
			ok = false
		}
	}
	if !ok {
		return "devel"
	}
	return v
}
