package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
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
