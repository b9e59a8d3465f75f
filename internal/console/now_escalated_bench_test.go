package console_test

import (
	"net/http"
	"testing"

	"github.com/relay-energy/relay/internal/store"
)

// BenchmarkNowPage100kEscalated is BenchmarkNowPage100k ten minutes into a
// storm nobody acknowledged (or after an upgrade, when every ongoing alarm
// is past its step): every alarm's escalation step was taken, naming
// oncall. The page shows 200 rows.
func BenchmarkNowPage100kEscalated(b *testing.B) {
	s, h, ck := bigSite(b, 100_000, 1000)
	var kvs []store.KV
	for _, a := range manyAlarms(100_000) {
		kvs = append(kvs, store.KV{NS: "escalate", Key: a.OriginID,
			Value: []byte(`{"done":{"people/600":"2026-11-23T08:10:00Z"},"notes":{"oncall":"Escalated: unacknowledged for 10m"},"to":{"oncall":"people/600"}}`)})
		if len(kvs) == 10_000 {
			if err := s.st.Put(kvs...); err != nil {
				b.Fatal(err)
			}
			kvs = kvs[:0]
		}
	}
	var body string
	b.ResetTimer()
	for b.Loop() {
		var code int
		if code, body = serve(h, ck, "/console/"); code != http.StatusOK {
			b.Fatalf("GET /console/: %d", code)
		}
	}
	b.ReportMetric(float64(len(body)), "bytes/page")
}
