package service

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/guard"
)

// An address becomes known (exempt from the overall bucket) by a right
// token alone: on 258a954 one request the mux answered 404 or 405 before
// adminGuard ran made it known, and 100 such addresses then made 1,000
// guesses in 60 s past an empty overall bucket.
func TestARequestWithoutATokenDoesNotMakeAnAddressKnown(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := guard.NewThrottle(func() time.Time { return now }, nil, nil)
	mux := http.NewServeMux()
	mux.Handle("GET /report", adminHandler("the-admin-token-0123456789", slog.New(slog.DiscardHandler), "x",
		func(w http.ResponseWriter, _ *http.Request) error { return nil }))
	api := throttleBearer(th, guard.Proxies{}, mux)
	call := func(addr, method, path, token string) int {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = addr + ":5000"
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		return w.Code
	}
	// The attacker's 100 addresses each send one request without a token.
	for i := range 100 {
		call(fmt.Sprintf("198.51.100.%d", i), "POST", "/report", "")
	}
	// Drain the overall bucket from elsewhere.
	for i := range 2 * guard.OverallBurst {
		call(fmt.Sprintf("203.0.113.%d", i), "GET", "/report", "wrong-guess-000000")
	}
	guesses := 0
	for round := range 10 { // 60 s
		for i := range 100 {
			if call(fmt.Sprintf("198.51.100.%d", i), "GET", "/report", fmt.Sprintf("guess-%d-%d-xxxxxxxx", round, i)) == http.StatusUnauthorized {
				guesses++
			}
		}
		now = now.Add(guard.PerAddressEvery)
	}
	t.Logf("%d guesses checked in 60 s while the overall bucket was empty", guesses)
	if guesses > 60+guard.OverallBurst {
		t.Errorf("%d guesses checked in 60 s; the overall bucket allows about 60", guesses)
	}
}

// 1,000 requests without a token from 1,000 IPv6 /64s, then the overall
// bucket drained: the operator known by a right token a second before is
// still let through (on 258a954 the requests filled the known set, pushed
// the operator out, and its right token got 429).
func TestRequestsWithoutATokenDoNotPushAnOperatorOut(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := guard.NewThrottle(func() time.Time { return now }, nil, nil)
	const token = "the-admin-token-0123456789"
	mux := http.NewServeMux()
	mux.Handle("GET /report", adminHandler(token, slog.New(slog.DiscardHandler), "x",
		func(w http.ResponseWriter, _ *http.Request) error { return nil }))
	api := throttleBearer(th, guard.Proxies{}, mux)
	call := func(addr, method, path, tok string) int {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = addr
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		return w.Code
	}
	const operator = "192.0.2.10:5000"
	if code := call(operator, "GET", "/report", token); code != http.StatusOK {
		t.Fatalf("operator: %d", code)
	}
	now = now.Add(time.Second)
	for i := range 1000 {
		call(fmt.Sprintf("[2001:db8:%x::1]:5000", i), "GET", "/nothing-here", "")
	}
	for i := range 2 * guard.OverallBurst {
		call(fmt.Sprintf("203.0.113.%d:5000", i), "GET", "/report", "wrong-guess-000000")
	}
	if code := call(operator, "GET", "/report", token); code != http.StatusOK {
		t.Errorf("the operator's right token, known for 1 s, got %d after 1,000 tokenless 404s from other addresses", code)
	}
}

// Right tokens give their tokens back when checked, not when the handler
// has answered: six slow requests at once from one address (a control room
// behind one NAT address, a script) all run (on 258a954 the sixth got 429).
func TestSlowRightRequestsDoNotHoldTheBucket(t *testing.T) {
	th := guard.NewThrottle(nil, nil, nil)
	const token = "the-admin-token-0123456789"
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	mux := http.NewServeMux()
	mux.Handle("POST /deadletters/replay", adminHandler(token, slog.New(slog.DiscardHandler), "x",
		func(w http.ResponseWriter, _ *http.Request) error { entered <- struct{}{}; <-release; return nil }))
	api := throttleBearer(th, guard.Proxies{}, mux)
	codes := make(chan int, 10)
	for range guard.PerAddressBurst {
		go func() {
			r := httptest.NewRequest("POST", "/deadletters/replay", nil)
			r.RemoteAddr = "192.0.2.10:5000"
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			api.ServeHTTP(w, r)
			codes <- w.Code
		}()
		<-entered
	}
	r := httptest.NewRequest("POST", "/deadletters/replay", nil)
	r.RemoteAddr = "192.0.2.10:5000"
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	go func() { api.ServeHTTP(w, r); codes <- -1 }()
	select {
	case <-entered:
	case c := <-codes:
		t.Errorf("a 6th request with the right token, 5 long ones in flight: %d %q", w.Code, w.Body.String())
		_ = c
	}
	close(release)
}
