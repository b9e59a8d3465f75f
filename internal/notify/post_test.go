package notify_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
)

// TestPostClassifiesEveryStatus is the status table every HTTP sink shares:
// 2xx delivered, 3xx refused and not followed, 408/425/429/5xx retried after
// their Retry-After, other 4xx final, network failures retried.
func TestPostClassifiesEveryStatus(t *testing.T) {
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer elsewhere.Close()
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		status     int
		retryAfter string
		retry      bool
		wait       time.Duration
	}{
		{200, "", false, 0}, {202, "", false, 0}, {204, "", false, 0},
		{301, "", false, 0}, {302, "", false, 0}, {307, "", false, 0}, {308, "", false, 0},
		{400, "", false, 0}, {401, "", false, 0}, {403, "", false, 0}, {404, "", false, 0}, {410, "", false, 0},
		{408, "", true, 0}, {425, "", true, 0}, {429, "7", true, 7 * time.Second},
		{429, now.Add(time.Minute).Format(http.TimeFormat), true, time.Minute},
		{500, "", true, 0}, {502, "", true, 0}, {503, "120", true, 2 * time.Minute}, {504, "", true, 0},
	}
	for _, c := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			if c.status >= 300 && c.status < 400 {
				http.Redirect(w, r, elsewhere.URL+"/stolen", c.status)
				return
			}
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte("answer\nof the\treceiver"))
		}))
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook?key=s3cr3t", bytes.NewReader([]byte("{}")))
		answer, res, err := notify.Post(notify.NoRedirects(nil), req, func() time.Time { return now }, "test sink", nil)
		srv.Close()
		ok := c.status < 300
		if (err == nil) != ok || res.Retry != c.retry || res.RetryAfter != c.wait {
			t.Errorf("HTTP %d: err %v, retry %v after %s; want ok %v, retry %v after %s", c.status, err, res.Retry, res.RetryAfter, ok, c.retry, c.wait)
		}
		if ok && c.status != 204 && string(answer) != "answer\nof the\treceiver" {
			t.Errorf("HTTP %d: answer %q", c.status, answer)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "test sink: HTTP ") || strings.Contains(err.Error(), "s3cr3t")) {
			t.Errorf("HTTP %d: error %q does not start with what and the status, or shows the URL", c.status, err)
		}
		var se *notify.StatusError
		if err != nil && (!errors.As(err, &se) || se.Status != c.status) {
			t.Errorf("HTTP %d: error %v holds no StatusError of the status", c.status, err)
		}
		if se != nil && c.status >= 400 && string(se.Answer) != "answer\nof the\treceiver" {
			t.Errorf("HTTP %d: StatusError answer %q", c.status, se.Answer)
		}
	}
	if followed.Load() != 0 {
		t.Error("a redirect was followed")
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	req, _ := http.NewRequest(http.MethodPost, closed.URL+"/hook?key=s3cr3t", nil)
	if _, res, err := notify.Post(notify.NoRedirects(nil), req, time.Now, "test sink", nil); err == nil || !res.Retry || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("unreachable receiver: retry %v, err %v; want a retried error without the URL", res.Retry, err)
	}
}

// TestPostHandsBackTheAnswerAsReceivedAndCleansOnlyItsError is the
// redaction boundary of every HTTP sink: what a vendor answers is data a
// sink may send back (a token Feishu hands out again, a long connection's
// URL, a message id), so Post and PostJSON return it byte for byte even
// when it holds a configured secret; only the error, which is logged and
// stored, is cleaned, and before it is cut, so that no piece of a secret
// survives the cut either.
func TestPostHandsBackTheAnswerAsReceivedAndCleansOnlyItsError(t *testing.T) {
	const secret = "s3cr3t-app-secret-0123456789"
	set := redact.New(secret)
	for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusInternalServerError} {
		// The secret starts 14 characters before the 200th of the answer,
		// where errors cut it, or well before.
		for _, pad := range []int{0, 176} {
			body := strings.Repeat("-", pad) + `{"token":"` + secret + `","URL":"wss://h/ws?aid=` + secret + `"}`
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
			answer, _, err := notify.Post(notify.NoRedirects(nil), req, time.Now, "test sink", set)
			poster := notify.NewPoster(nil, nil, nil, 0, set)
			posted, _, postErr := poster.PostJSON(context.Background(), "test sink", srv.URL, []byte("{}"), nil)
			srv.Close()
			for via, got := range map[string]struct {
				answer []byte
				err    error
			}{"Post": {answer, err}, "PostJSON": {posted, postErr}} {
				if se, ok := errors.AsType[*notify.StatusError](got.err); ok {
					got.answer = se.Answer
				}
				if string(got.answer) != body {
					t.Errorf("%s, HTTP %d: the answer handed back is\n%s\nwant it as received:\n%s", via, status, got.answer, body)
				}
				if (got.err == nil) != (status == http.StatusOK) {
					t.Errorf("%s, HTTP %d: error %v", via, status, got.err)
				}
				if got.err != nil && (strings.Contains(got.err.Error(), secret[:12]) || !strings.Contains(got.err.Error(), redact.Mark)) {
					t.Errorf("%s, HTTP %d, secret after %d bytes: the error holds the secret or a piece of it, or does not show where it was: %v", via, status, pad, got.err)
				}
			}
		}
	}
}
