package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

const slowViewToken = "slow-client-view-token-0123456789"

// slowTimeouts are the ops listener's timeouts in TestSlowClientsAreLetGo,
// short so that the test takes seconds; the real ones are the same bounds,
// longer (defaultOpsTimeouts).
var slowTimeouts = opsTimeouts{readHeader: 400 * time.Millisecond, read: 800 * time.Millisecond,
	write: 1200 * time.Millisecond, idle: 500 * time.Millisecond}

// closedWithin reads from c until the server closes it, and fails unless
// that happens within d. What it reads (an answer, a 408) is ignored.
func closedWithin(t *testing.T, what string, c net.Conn, d time.Duration, started time.Time) {
	t.Helper()
	_ = c.SetReadDeadline(started.Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: still open %s after it began, want it closed within %s", what, time.Since(started).Round(time.Millisecond), d)
		return
	}
	t.Logf("%s: closed %s after it began", what, time.Since(started).Round(time.Millisecond))
}

// TestSlowClientsAreLetGo: clients that reach the ops listener and hold a
// connection without finishing a request (before any login) are closed
// within the listener's timeouts: an idle keep-alive, trickled headers, a
// trickled body, and a hundred connections that never send a byte. A
// logged-in session's live-update streams outlive those timeouts (the
// stream lifts them) up to MaxStreamsPerSession, and the next is refused
// with 429. Meanwhile the poller polls the upstream on time: no gap
// between its requests longer than a second.
func TestSlowClientsAreLetGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	up := sim.StartTest(t, sim.Options{RateLimit: 600})
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	writeFile(t, rules, "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n")
	appID, secret := up.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": up.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret, "RELAY_RATE_LIMIT": "600",
		"RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rules, "RELAY_VIEW_TOKEN": slowViewToken,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startRun(t, Options{Config: cfg, Console: io.Discard, Logger: NewLogger(io.Discard, "error", "text", nil),
		opsTimeouts: slowTimeouts})
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// The poller's requests from now on.
	from := time.Now()
	margin := 700 * time.Millisecond

	// A hundred connections that never send a byte.
	silent := make([]net.Conn, 100)
	for i := range silent {
		silent[i] = dial()
	}
	silentFrom := time.Now()

	// An idle keep-alive: one request answered, then nothing.
	idle := dial()
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on the keep-alive connection: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	idleFrom := time.Now()

	// Trickled headers: a byte every 100 ms, never the end of them.
	headers := dial()
	headersFrom := time.Now()
	go trickle(headers, "GET /console/login HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: "+strings.Repeat("a", 1000))

	// A trickled body: the login form's headers at once, its body a byte
	// every 100 ms.
	body := dial()
	bodyFrom := time.Now()
	form := "token=" + strings.Repeat("x", 500)
	if _, err := fmt.Fprintf(body, "POST /console/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n", addr, len(form)); err != nil {
		t.Fatal(err)
	}
	go trickle(body, form)

	// The live-update streams of one session.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := client.PostForm("http://"+addr+"/console/login", url.Values{"token": {slowViewToken}})
	if err != nil || login.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %v %v", login, err)
	}
	login.Body.Close()
	var streams []*http.Response
	for i := range console.MaxStreamsPerSession + 1 {
		resp, err := client.Get("http://" + addr + "/console/events")
		if err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if i == console.MaxStreamsPerSession {
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("stream %d of one session: %s, want 429 with Retry-After", i+1, resp.Status)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %s, want 200", i+1, resp.Status)
		}
		streams = append(streams, resp)
	}

	for i, c := range silent {
		closedWithin(t, fmt.Sprintf("silent connection %d", i+1), c, slowTimeouts.readHeader+margin, silentFrom)
	}
	closedWithin(t, "idle keep-alive", idle, slowTimeouts.idle+margin, idleFrom)
	closedWithin(t, "trickled headers", headers, slowTimeouts.readHeader+margin, headersFrom)
	closedWithin(t, "trickled body", body, slowTimeouts.read+margin, bodyFrom)

	// The streams outlive every timeout of the listener: past the write
	// timeout, each still reads (its first lines, then nothing: no EOF).
	time.Sleep(slowTimeouts.write + margin - time.Since(from))
	for i, s := range streams {
		br := bufio.NewReader(s.Body)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "retry:") {
			t.Errorf("stream %d after the write timeout: %q %v, want it open with its first lines", i+1, line, err)
		}
	}

	// The poller went on polling meanwhile.
	var last time.Time
	n := 0
	for _, a := range up.Arrivals() {
		if a.At.Before(from) {
			continue
		}
		if !last.IsZero() && a.At.Sub(last) > time.Second {
			t.Errorf("the poller's requests paused %s (from %s), want none longer than 1s", a.At.Sub(last).Round(time.Millisecond),
				last.Format("15:04:05.000"))
		}
		last = a.At
		n++
	}
	if n < 5 || time.Since(last) > time.Second {
		t.Errorf("the poller made %d requests since the slow clients came, the last %s ago; want it polling on", n, time.Since(last).Round(time.Millisecond))
	}
}

// trickle writes s to c a byte every 100 ms, until a write fails.
func trickle(c net.Conn, s string) {
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
