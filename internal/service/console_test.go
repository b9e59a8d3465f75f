package service

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

// An administrator logs in to the console of the running service,
// acknowledges an alarm from the Now page, and the ops API shows who
// acknowledged it (as the console's user, via the API) and Slack's message
// is edited.
func TestConsoleAcknowledgesThroughTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	s := startAckService(t)
	a, err := s.up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	start := s.started("C0PAGER", a)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + s.ops + "/console/"
	do := func(method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "http://"+s.ops)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := do("POST", "login", url.Values{"token": {ackAdminToken}, "name": {"ana"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s, want 303", resp.Status)
	}
	var page string
	testwait.For(t, 10*time.Second, "the alarm on the Now page", func() bool {
		_, page = do("GET", "", nil)
		return strings.Contains(page, `action="/console/alarms/`+a+`/ack"`)
	})
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	if resp, body := do("POST", "alarms/"+a+"/ack", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an action without the CSRF token: %s %s, want 403", resp.Status, body)
	}
	if resp, body := do("POST", "alarms/"+a+"/ack", url.Values{"csrf": {m[1]}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge: %s %s, want 303", resp.Status, body)
	}
	if got := s.alarm(a); !got.Acknowledged || got.By != "console:ana" || got.Via != "api" {
		t.Fatalf("GET /alarms/%s: %+v, want acknowledged by console:ana via api", a, got)
	}
	testwait.For(t, 10*time.Second, "Slack's message edited", func() bool { n, _ := s.updates("C0PAGER", start.TS); return n == 1 })
}

// A browser that keeps the Now page open holds a live-update stream; the
// relay still stops at once and cleanly: the ops server's shutdown ends
// the stream instead of waiting for it.
func TestConsoleLiveUpdateDoesNotHoldTheShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	s := startAckService(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + s.ops + "/console/"
	req, _ := http.NewRequest("POST", base+"login", strings.NewReader(url.Values{"token": {ackAdminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %v %v", resp, err)
	}
	resp.Body.Close()
	stream, err := c.Get(base + "events")
	if err != nil || stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET events: %v %v, want a 200 event stream", stream, err)
	}
	defer stream.Body.Close()
	began := time.Now()
	if err := s.stop(); err != nil {
		t.Fatalf("the relay stopped with %v while a live-update stream was open", err)
	}
	if _, err := io.ReadAll(stream.Body); err != nil {
		t.Logf("the stream ended with %v", err)
	}
	// Without the stream's end at the shutdown, the ops server would wait
	// its whole opsShutdownWait for it.
	if took := time.Since(began); took >= opsShutdownWait {
		t.Errorf("the relay took %s to stop with a live-update stream open: the ops server waited for it", took)
	}
}
