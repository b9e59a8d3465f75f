package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Message is one request a fake robot got (DingTalk, WeCom, Feishu, Teams,
// PagerDuty), as the tests that every robot sink shares read it
// (internal/notify/robot/robottest).
type Message interface {
	// Arrived is when the fake got the request, on its clock.
	Arrived() time.Time
	// Taken says the fake took the message: it answered success.
	Taken() bool
	// Answer is the fake's answer, as a failing test reports it.
	Answer() string
	// Text is what the message says.
	Text() string
}

// Received is what a fake robot records of every request, in the Message
// of its vendor.
type Received struct {
	// At is when the fake got the request, on its clock.
	At time.Time
	// Body is the request's JSON body, decoded.
	Body map[string]any
	// Size is the body's length in bytes.
	Size int
}

// Arrived is when the fake got the request, on its clock.
func (r Received) Arrived() time.Time { return r.At }

// fake is what every fake robot keeps: its server, its clock, and every
// request it got with the answer each got, which mu guards with the
// robot's own state.
type fake[M Message] struct {
	server   *httptest.Server
	now      func() time.Time
	mu       sync.Mutex
	messages []M
}

// start serves handler, telling the time with now, until t ends.
func (f *fake[M]) start(t testing.TB, now func() time.Time, handler http.HandlerFunc) {
	f.now = now
	f.server = httptest.NewServer(handler)
	t.Cleanup(f.server.Close)
}

// Messages returns every request so far, with the answer each got.
func (f *fake[M]) Messages() []M { return cloned(&f.mu, &f.messages) }

// Accepted returns the messages the fake took, in order of arrival.
func (f *fake[M]) Accepted() []M { return taken(f.Messages()) }

// taken returns those of msgs the fake took, in order of arrival.
func taken[M Message](msgs []M) []M {
	var out []M
	for _, m := range msgs {
		if m.Taken() {
			out = append(out, m)
		}
	}
	return out
}

// cloned returns a copy of *xs, read under mu.
func cloned[T any](mu *sync.Mutex, xs *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*xs)
}

// copied returns a copy of the values *ps points to, read under mu, each
// passed to deep (when not nil) to copy what it holds by reference.
func copied[T any](mu *sync.Mutex, ps *[]*T, deep func(*T)) []T {
	mu.Lock()
	defer mu.Unlock()
	out := make([]T, len(*ps))
	for i, p := range *ps {
		out[i] = *p
		if deep != nil {
			deep(&out[i])
		}
	}
	return out
}

// readBody reads a request's body, up to 1 MiB.
func readBody(r *http.Request) []byte {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	return body
}

// readJSON reads a request's body, up to 1 MiB, and decodes it as a JSON
// object.
func readJSON(r *http.Request) ([]byte, map[string]any, error) {
	body := readBody(r)
	var m map[string]any
	err := json.Unmarshal(body, &m)
	return body, m, err
}

// hmacBase64 is the base64 of HmacSHA256(key, message), as the vendors that
// sign (DingTalk, Feishu) document their signatures.
func hmacBase64(key, message string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(message))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
