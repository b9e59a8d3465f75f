package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request a Receiver got.
type Request struct {
	Header http.Header
	Body   []byte
	// Verified says the Standard Webhooks signature checked out (always
	// false when the receiver has no secret).
	Verified bool
	// Reject is why the signature did not check out, if it did not.
	Reject string
	// Status is the HTTP status the receiver answered with.
	Status int
}

// Answer is a response a Receiver gives instead of accepting.
type Answer struct {
	Status int
	// RetryAfter is the Retry-After header, if any.
	RetryAfter string
	// Location is the Location header, if any (for redirects).
	Location string
}

// Receiver is a webhook endpoint that verifies Standard Webhooks signatures
// (standardwebhooks.com, v1) with its own implementation, written from the
// specification apart from the sink's signer. A request whose signature does
// not verify is answered 401 when the receiver has a secret.
type Receiver struct {
	server *httptest.Server
	key    []byte

	mu       sync.Mutex
	requests []Request
	queued   []Answer
	down     *Answer
	now      func() time.Time
}

// NewReceiver starts a receiver for t that verifies with secret ("" verifies
// nothing). It is closed when the test ends.
func NewReceiver(t testing.TB, secret string) *Receiver {
	t.Helper()
	r := &Receiver{}
	if secret != "" {
		key, err := secretKey(secret)
		if err != nil {
			t.Fatalf("notifytest: receiver secret: %v", err)
		}
		r.key = key
	}
	r.server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.server.Close)
	return r
}

// URL returns the receiver's URL.
func (r *Receiver) URL() string { return r.server.URL + "/hook" }

// CheckTimestamps makes the receiver reject a webhook-timestamp more than
// five minutes from now(), as the Standard Webhooks libraries do.
func (r *Receiver) CheckTimestamps(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

// Queue makes the next requests get these answers, one each.
func (r *Receiver) Queue(answers ...Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued = append(r.queued, answers...)
}

// Down makes every request get a until Up.
func (r *Receiver) Down(a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = &a
}

// Up ends Down.
func (r *Receiver) Up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = nil
}

// Requests returns every request received, in order.
func (r *Receiver) Requests() []Request { return cloned(&r.mu, &r.requests) }

// Accepted returns the bodies of the requests answered 2xx, in order.
func (r *Receiver) Accepted() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, q := range r.requests {
		if q.Status >= 200 && q.Status < 300 {
			out = append(out, q.Body)
		}
	}
	return out
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := Request{Header: req.Header.Clone(), Body: body, Status: http.StatusNoContent}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key != nil {
		if err := r.verify(req.Header, body); err != nil {
			q.Reject = err.Error()
			q.Status = http.StatusUnauthorized
		} else {
			q.Verified = true
		}
	}
	var a *Answer
	switch {
	case q.Status != http.StatusNoContent:
	case r.down != nil:
		a = r.down
	case len(r.queued) > 0:
		a = &r.queued[0]
		r.queued = r.queued[1:]
	}
	if a != nil {
		q.Status = a.Status
		if a.RetryAfter != "" {
			w.Header().Set("Retry-After", a.RetryAfter)
		}
		if a.Location != "" {
			w.Header().Set("Location", a.Location)
		}
	}
	r.requests = append(r.requests, q)
	w.WriteHeader(q.Status)
}

// verify checks the Standard Webhooks headers of a request; r.mu is held.
func (r *Receiver) verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not a number of seconds")
	}
	if r.now != nil {
		if d := r.now().Sub(time.Unix(secs, 0)); d > 5*time.Minute || d < -5*time.Minute {
			return errors.New("webhook-timestamp is too far from now")
		}
	}
	var signed strings.Builder
	signed.WriteString(id)
	signed.WriteByte('.')
	signed.WriteString(ts)
	signed.WriteByte('.')
	signed.Write(body)
	mac := hmac.New(sha256.New, r.key)
	mac.Write([]byte(signed.String()))
	want := mac.Sum(nil)
	// The header holds space-separated "version,signature" pairs; one valid
	// v1 signature is enough.
	for _, pair := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(pair, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}

// secretKey decodes a Standard Webhooks secret: "whsec_" followed by the
// base64 of the key; any other string is the key itself.
func secretKey(secret string) ([]byte, error) {
	const prefix = "whsec_"
	if !strings.HasPrefix(secret, prefix) {
		return []byte(secret), nil
	}
	return base64.StdEncoding.DecodeString(secret[len(prefix):])
}
