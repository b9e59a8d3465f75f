package console_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// deadLetterSiteOf is a console whose store holds n dead letters at sink
// hook, each the start of an alarm whose event is about size bytes, and the
// handler and session cookie of a viewer.
func deadLetterSiteOf(tb testing.TB, n, size int) (*site, http.Handler, *http.Cookie) {
	tb.Helper()
	return deadLetterSiteWith(tb, store.Options{}, n, size)
}

// deadLetterSiteWith is deadLetterSiteOf on a store opened with opts, which
// s.st is.
func deadLetterSiteWith(tb testing.TB, opts store.Options, n, size int) (*site, http.Handler, *http.Cookie) {
	tb.Helper()
	st, err := store.Open(filepath.Join(tb.TempDir(), "dead.db"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	s := newSite(tb, console.Options{AdminToken: adminToken, ViewToken: viewToken, Store: st}, false)
	s.st = st
	now := time.Now().UTC().Truncate(time.Second)
	route := func(*event.Event) []string { return []string{"hook"} }
	pad := strings.Repeat("x", size)
	for i := 0; i < n; i += 1000 {
		var batch []event.Alarm
		for j := i; j < min(n, i+1000); j++ {
			id := fmt.Sprintf("D%07d", j)
			batch = append(batch, event.Alarm{OriginID: id, Status: event.StatusOngoing, Level: j % 4, EventCode: "E001",
				StationID: "ST1", DeviceSN: "SN1", OccurredAt: now.Add(-time.Duration(j) * time.Second),
				Raw: []byte(fmt.Sprintf(`{"originId":%q,"payload":%q}`, id, pad))})
		}
		if _, err := s.st.Apply(context.Background(), store.Batch{Observed: batch}, route); err != nil {
			tb.Fatal(err)
		}
	}
	for {
		es, err := s.st.Pending("hook", 1000)
		if err != nil {
			tb.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			if err := s.st.DeadLetter(e, "HTTP 400: bad payload"); err != nil {
				tb.Fatal(err)
			}
		}
	}
	c := s.browser()
	s.login(c, viewToken, "")
	var ck *http.Cookie
	for _, k := range c.Jar.Cookies(mustURL(tb, s.srv.URL+"/console/")) {
		if k.Name == console.SessionCookieName(false, s.srv.Listener.Addr().String()) {
			ck = k
		}
	}
	if ck == nil {
		tb.Fatal("no session cookie after login")
	}
	return s, s.srv.Config.Handler, ck
}

// BenchmarkDeadLetterPages serves the Dead letters page, the Show page of
// one dead letter and the History page of one alarm (which shows the
// alarm's dead letters) while sink hook holds 10,000 dead letters of 16 KiB:
// the memory one request allocates (B/op), which must not grow with the
// dead letters held (docs/design.md §5, "Dead letters").
func BenchmarkDeadLetterPages(b *testing.B) {
	_, h, ck := deadLetterSiteOf(b, 10_000, 16<<10)
	for _, p := range []struct{ name, path string }{
		{"list", "/console/deadletters"},
		{"list-sink", "/console/deadletters?sink=hook"},
		{"show", "/console/deadletters/hook/5000"},
		{"history-alarm", "/console/history/D0005000"},
	} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			var body string
			for b.Loop() {
				var code int
				if code, body = serve(h, ck, p.path); code != http.StatusOK {
					b.Fatalf("GET %s: %d", p.path, code)
				}
			}
			b.ReportMetric(float64(len(body)), "bytes/page")
		})
	}
}
