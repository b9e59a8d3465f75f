package notifytest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const pagerDutyTestKey = "R0UT1NGKEY0123456789abcdefABCDEF"

// postPagerDuty posts an event as PagerDuty's documentation shows it and
// returns the status and the answer.
func postPagerDuty(t *testing.T, p *PagerDuty, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(p.URL(), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans
}

func pagerDutyTrigger(key, dedup, summary, severity string) string {
	b, _ := json.Marshal(map[string]any{
		"routing_key": key, "event_action": "trigger", "dedup_key": dedup,
		"payload": map[string]any{"summary": summary, "source": "host1", "severity": severity, "timestamp": "2015-07-17T08:42:58.315Z"},
	})
	return string(b)
}

func pagerDutyResolve(key, dedup string) string {
	return `{"routing_key":"` + key + `","event_action":"resolve","dedup_key":"` + dedup + `"}`
}

func TestPagerDutyFakeValidatesEventsAsTheVendorDocuments(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	p := NewPagerDuty(t, func() time.Time { return now }, pagerDutyTestKey)
	cases := []struct {
		name   string
		body   string
		status int
		error  string
	}{
		{"a trigger", pagerDutyTrigger(pagerDutyTestKey, "a1", "disk full", "critical"), 202, ""},
		{"a resolve", pagerDutyResolve(pagerDutyTestKey, "a1"), 202, ""},
		{"a short routing key", pagerDutyTrigger("short", "a1", "x", "info"), 400, "should be 32 characters"},
		{"an unknown routing key", pagerDutyTrigger(strings.Repeat("x", 32), "a1", "x", "info"), 400, "Invalid routing key"},
		{"an unknown severity", pagerDutyTrigger(pagerDutyTestKey, "a1", "x", "fatal"), 400, "payload.severity"},
		{"no summary", pagerDutyTrigger(pagerDutyTestKey, "a1", "", "info"), 400, "payload.summary"},
		{"a summary over 1024 characters", pagerDutyTrigger(pagerDutyTestKey, "a1", strings.Repeat("é", 1025), "info"), 400, "payload.summary"},
		{"a summary of 1024 characters", pagerDutyTrigger(pagerDutyTestKey, "a2", strings.Repeat("é", 1024), "info"), 202, ""},
		{"a dedup_key over 255 characters", pagerDutyTrigger(pagerDutyTestKey, strings.Repeat("k", 256), "x", "info"), 400, "dedup_key"},
		{"a resolve without dedup_key", pagerDutyResolve(pagerDutyTestKey, ""), 400, "dedup_key"},
		{"an unknown action", `{"routing_key":"` + pagerDutyTestKey + `","event_action":"close","dedup_key":"a1"}`, 400, "event_action"},
		{"not JSON", `routing_key=x`, 400, "JSON"},
	}
	for _, c := range cases {
		status, ans := postPagerDuty(t, p, c.body)
		if status != c.status {
			t.Errorf("%s: HTTP %d %v, want %d", c.name, status, ans, c.status)
			continue
		}
		if c.status == 202 && (ans["status"] != "success" || ans["dedup_key"] == "") {
			t.Errorf("%s: answer %v, want success and the dedup_key", c.name, ans)
		}
		if c.status == 400 {
			errs, _ := json.Marshal(ans["errors"])
			if ans["status"] != "invalid event" || ans["message"] != "Event object is invalid" || !strings.Contains(string(errs), c.error) {
				t.Errorf("%s: answer %v, want invalid event naming %q", c.name, ans, c.error)
			}
		}
	}
}

func TestPagerDutyFakeOpensAnotherIncidentOnATriggerAfterTheResolve(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	p := NewPagerDuty(t, func() time.Time { return now }, pagerDutyTestKey)
	for _, body := range []string{
		pagerDutyTrigger(pagerDutyTestKey, "a1", "first", "error"),
		pagerDutyTrigger(pagerDutyTestKey, "a1", "again", "error"),
		pagerDutyResolve(pagerDutyTestKey, "a1"),
		pagerDutyResolve(pagerDutyTestKey, "a1"), // dropped: nothing open
		pagerDutyTrigger(pagerDutyTestKey, "a1", "second", "warning"),
		pagerDutyResolve(pagerDutyTestKey, "never-triggered"),
	} {
		if status, ans := postPagerDuty(t, p, body); status != 202 {
			t.Fatalf("HTTP %d %v for %s", status, ans, body)
		}
	}
	got := p.Incidents()
	if len(got) != 2 {
		t.Fatalf("incidents %+v, want two of a1", got)
	}
	if got[0].Summary != "first" || got[0].Triggers != 2 || !got[0].Resolved {
		t.Errorf("first incident %+v, want first, two triggers, resolved", got[0])
	}
	if got[1].Summary != "second" || got[1].Resolved {
		t.Errorf("second incident %+v, want second, open", got[1])
	}
}

func TestPagerDutyFakeRefusesMoreThan120EventsAMinutePerRoutingKey(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	p := NewPagerDuty(t, func() time.Time { return now }, pagerDutyTestKey)
	for i := range 120 {
		if status, ans := postPagerDuty(t, p, pagerDutyResolve(pagerDutyTestKey, "k")); status != 202 {
			t.Fatalf("event %d: HTTP %d %v", i+1, status, ans)
		}
		now = now.Add(400 * time.Millisecond)
	}
	if status, _ := postPagerDuty(t, p, pagerDutyResolve(pagerDutyTestKey, "k")); status != http.StatusTooManyRequests {
		t.Fatalf("event 121 within a minute: HTTP %d, want 429", status)
	}
	now = now.Add(13 * time.Second) // the first event is now a minute old
	if status, ans := postPagerDuty(t, p, pagerDutyResolve(pagerDutyTestKey, "k")); status != 202 {
		t.Fatalf("an event once the first left the window: HTTP %d %v", status, ans)
	}
}
