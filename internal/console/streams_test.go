package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
)

// A logout ends the session's open live-update streams at once, with no
// change of the store to wake them (issue 37, item 6: the stream of a
// logged-out session stayed open until the store next changed), after
// telling the page to refresh (which then finds the session gone); the
// streams of another session go on.
func TestLogoutEndsTheSessionsStreamsAtOnce(t *testing.T) {
	s := newSite(t, console.Options{ViewToken: viewToken}, false)
	c, other := s.browser(), s.browser()
	page := s.login(c, viewToken, "")
	s.login(other, viewToken, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, ids := s.events(ctx, c)
	_, otherIDs := s.events(ctx, other)
	time.Sleep(50 * time.Millisecond) // both streams registered
	began := time.Now()
	resp, _ := s.do(c, "POST", "/console/logout", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s", resp.Status)
	}
	for ended := false; !ended; {
		select {
		case _, ok := <-ids:
			ended = !ok
		case <-time.After(2 * time.Second):
			t.Fatalf("the logged-out session's stream is still open %s after the logout", time.Since(began).Round(time.Millisecond))
		}
	}
	t.Logf("the stream ended %s after the logout", time.Since(began).Round(time.Millisecond))
	select {
	case _, ok := <-otherIDs:
		if !ok {
			t.Fatal("another session's stream ended with the logout")
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// A session holds at most MaxStreamsPerSession live-update streams, the
// process MaxStreams over every session: the next is answered 429 with
// Retry-After, and a stream that ends frees its place.
func TestLiveUpdateStreamsAreBounded(t *testing.T) {
	s := newSite(t, console.Options{ViewToken: viewToken}, false)
	open := func(c *http.Client) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/console/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	c := s.browser()
	s.login(c, viewToken, "")
	var first context.CancelFunc
	for i := range console.MaxStreamsPerSession {
		resp, cancel := open(c)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of a session: %s, want 200", i+1, resp.Status)
		}
		if i == 0 {
			first = cancel
		}
	}
	if resp, _ := open(c); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("stream %d of a session: %s, want 429 with Retry-After", console.MaxStreamsPerSession+1, resp.Status)
	}
	first()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := open(c)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stream ended, and the session's next is still refused: %s", resp.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The process: sessions of MaxStreamsPerSession streams each, up to
	// MaxStreams in all (this session holds MaxStreamsPerSession already).
	for n := console.MaxStreamsPerSession; n < console.MaxStreams; {
		b := s.browser()
		s.login(b, viewToken, "")
		for i := 0; i < console.MaxStreamsPerSession && n < console.MaxStreams; i++ {
			if resp, _ := open(b); resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %d of the process: %s, want 200", n+1, resp.Status)
			}
			n++
		}
	}
	b := s.browser()
	s.login(b, viewToken, "")
	if resp, _ := open(b); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("stream %d of the process, a new session's first: %s, want 429", console.MaxStreams+1, resp.Status)
	}
}

// stream opens the live-update stream of c's session.
func (s *site) stream(ctx context.Context, c *http.Client) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/console/events", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /console/events: %s", resp.Status)
	}
	return resp
}

// lines returns the lines of the live-update stream resp as they come,
// closed when it ends.
func lines(resp *http.Response) <-chan string {
	out := make(chan string, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// endOf reads the stream's lines until it ends, and reports whether it said
// "event: ended" (the session ended) first, and when it ended.
func endOf(t *testing.T, ls <-chan string, within time.Duration) (bool, time.Time) {
	t.Helper()
	ended := false
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-ls:
			if !ok {
				return ended, time.Now()
			}
			ended = ended || l == "event: ended"
		case <-timeout:
			t.Fatalf("the stream is still open %s on", within)
		}
	}
}

// loggedInOnAClock is a console whose sessions tell the time by a clock
// that advance moves on, and a viewer logged in to it.
func loggedInOnAClock(t *testing.T) (*site, *http.Client, func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newSite(t, console.Options{ViewToken: viewToken, Now: clock, Sessions: console.NewSessions(clock)}, false)
	c := s.browser()
	s.login(c, viewToken, "")
	return s, c, func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// A stream ends with its session's expiry, saying so to the page, with no
// logout and no change of the store to wake it: the expiry's own timer.
func TestAStreamEndsAtItsSessionsExpiry(t *testing.T) {
	s, c, advance := loggedInOnAClock(t)
	advance(console.SessionLifetime - 300*time.Millisecond) // 300 ms left when the stream opens
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ls := lines(s.stream(ctx, c))
	began := time.Now()
	ended, at := endOf(t, ls, 5*time.Second)
	if !ended {
		t.Error("the stream of an expired session ended without telling the page (event: ended)")
	}
	if d := at.Sub(began); d < 250*time.Millisecond {
		t.Errorf("the stream ended %s after it opened, before its session's expiry (300 ms)", d)
	}
	t.Logf("the stream ended %s after it opened, its session expiring at 300 ms", at.Sub(began).Round(time.Millisecond))
}

// A stream whose session is found gone on a heartbeat ends there, saying
// so: a session that expired by the sessions' clock while the stream's
// timer had not fired (the clock moved on: a suspended machine, a stepped
// clock).
func TestAStreamEndsOnTheHeartbeatThatFindsItsSessionGone(t *testing.T) {
	defer console.SetHeartbeat(100 * time.Millisecond)()
	s, c, advance := loggedInOnAClock(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ls := lines(s.stream(ctx, c))
	// Two heartbeats that find the session: the stream goes on.
	for beats := 0; beats < 2; {
		select {
		case l, ok := <-ls:
			if !ok {
				t.Fatal("the stream ended while its session was live")
			}
			if l == ": heartbeat" {
				beats++
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat in 5 s, want one every 100 ms")
		}
	}
	advance(console.SessionLifetime + time.Second)
	moved := time.Now()
	ended, at := endOf(t, ls, 5*time.Second)
	if !ended {
		t.Error("the stream ended without telling the page (event: ended)")
	}
	if d := at.Sub(moved); d < 0 || d > time.Second {
		t.Errorf("the stream ended %s after its session expired, want within a heartbeat (100 ms)", d)
	}
}
