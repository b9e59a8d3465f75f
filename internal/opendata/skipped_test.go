package opendata_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// badRow adds one record without a status to every alarm list answer.
type badRow struct{ next http.RoundTripper }

func (b badRow) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/getAlarmList") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = bytes.Replace(body, []byte(`"dataList":[`), []byte(`"dataList":[{"originId":"bad-1","status":null},`), 1)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

func TestAPersistentBadRowIsWarnedAboutOnceNotAtEveryPoll(t *testing.T) {
	hh := newHarness(t, sim.Options{Seed: 3}, func(c *opendata.Config) {
		c.HTTPClient = &http.Client{Transport: badRow{next: c.HTTPClient.Transport}}
	})
	if _, err := hh.sim.StartAlarm(sim.AlarmSpec{}); err != nil {
		t.Fatal(err)
	}
	q := opendata.AlarmQuery{Start: hh.clk.Now().Add(-time.Hour), End: hh.clk.Now()}
	for i := 0; i < 3; i++ {
		page, err := hh.client.AlarmPage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if page.Skipped != 1 || len(page.SkippedIDs) != 1 || page.SkippedIDs[0] != "bad-1" {
			t.Fatalf("skipped %d %v, want the bad row", page.Skipped, page.SkippedIDs)
		}
	}
	logs := hh.logs.String()
	if n := strings.Count(logs, "level=WARN msg=\"upstream alarm records skipped"); n != 1 {
		t.Fatalf("%d warnings for one persistent bad row, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, "level=DEBUG msg=\"upstream alarm records skipped"); n != 2 {
		t.Fatalf("%d debug lines for the repeats, want 2", n)
	}
}
