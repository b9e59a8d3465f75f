package opendata_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata"
)

// hugeUpstream serves a login and one getAlarmList answer of records alarms,
// each with a payload string of payload bytes, written as a stream so that
// the server itself holds no copy of the answer.
func hugeUpstream(t testing.TB, records, payload int, fill string) *httptest.Server {
	t.Helper()
	chunk := strings.Repeat(fill, 64<<10/len(fill)) // 64 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/login") {
			_, _ = io.WriteString(w, `{"code":"00000","data":{"accessToken":"tok","scope":"tenantId:1"}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"code":"00000","data":{"current":1,"size":500,"total":%d,"dataList":[`, records)
		for i := range records {
			if i > 0 {
				_, _ = io.WriteString(w, ",")
			}
			_, _ = fmt.Fprintf(w, `{"originId":"a%d","status":1,"eventLevel":0,"deviceSn":"D%d","occurrenceTime":1763712000000,"payload":"`, i, i)
			for left := payload; left > 0; left -= len(chunk) {
				_, _ = io.WriteString(w, chunk[:min(left, len(chunk))])
			}
			_, _ = io.WriteString(w, `"}`)
		}
		_, _ = io.WriteString(w, `]}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// peakHeap runs f while sampling the live heap every millisecond, and
// returns the highest sample above the heap before f, in MiB. Sampling
// ReadMemStats sees the heap between collections, which is what a pod's
// memory limit meets.
func peakHeap(f func()) float64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return float64(int64(peak.Load())-int64(base.HeapAlloc)) / (1 << 20)
}

func hugeAnswer(t testing.TB, records, payload int, fill string) (float64, *opendata.AlarmPage) {
	srv := hugeUpstream(t, records, payload, fill)
	c, err := opendata.New(opendata.Config{BaseURL: srv.URL, AppID: "app", AppSecret: "secret", RateLimit: 600})
	if err != nil {
		t.Fatal(err)
	}
	var page *opendata.AlarmPage
	var callErr error
	mib := peakHeap(func() {
		page, callErr = c.AlarmPage(t.Context(), opendata.AlarmQuery{
			Start: time.Now().Add(-time.Hour), End: time.Now(), Size: 500,
		})
	})
	if callErr != nil {
		t.Fatalf("a %d MiB answer: %v", records*payload>>20, callErr)
	}
	return mib, page
}

// TestHugeAnswerKeepsTheHeapSmall: one 60 MiB alarm answer (500 records of
// 120 KB, or one record of 60 MiB) is read with a heap well under a 128 Mi
// pod, and every record is kept, its payload cut.
func TestHugeAnswerKeepsTheHeapSmall(t *testing.T) {
	for _, tc := range []struct {
		name             string
		records, payload int
		fill             string
	}{
		{"500 records of 120 KB", 500, 120_000, "0123456789abcdef"},
		{"one record of 60 MiB", 1, 60 << 20, "0123456789abcdef"},
		{"one record of 60 MiB of UTF-8 continuation bytes", 1, 60 << 20, "\x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mib, page := hugeAnswer(t, tc.records, tc.payload, tc.fill)
			if mib >= 100 {
				t.Fatalf("the heap grew by %.1f MiB reading a 60 MiB answer; want under 100", mib)
			}
			if len(page.Alarms) != tc.records {
				t.Fatalf("%d records decoded; want %d", len(page.Alarms), tc.records)
			}
			raw := string(page.Alarms[0].Raw)
			if !strings.Contains(raw, "…[truncated]") || len(raw) > 2*opendata.MaxStringBytes {
				t.Fatalf("the record kept %d bytes, marked %v; want the payload cut to %d bytes",
					len(raw), strings.Contains(raw, "…[truncated]"), opendata.MaxStringBytes)
			}
			t.Logf("heap grew by %.1f MiB", mib)
		})
	}
}

func BenchmarkHugeAnswer(b *testing.B) {
	var worst float64
	for b.Loop() {
		mib, _ := hugeAnswer(b, 500, 120_000, "0123456789abcdef")
		worst = max(worst, mib)
	}
	b.ReportMetric(worst, "peak-heap-MiB")
}
