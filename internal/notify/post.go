package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// maxAnswer bounds the bytes of an answer an HTTP sink reads: enough for the
// JSON error objects of chat APIs, and nothing a broken receiver can grow.
const maxAnswer = 64 << 10

// NoRedirects returns a copy of c (a new client when nil) that never follows
// a redirect: a redirected POST would hand the event, and whatever credential
// the request carries, to an address nobody configured.
func NoRedirects(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		cp := *c
		out = &cp
	}
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return out
}

// Post sends req with c (made with NoRedirects) and classifies the answer as
// every HTTP sink does: a 2xx is delivered, and its answer (up to 64 KiB) is
// returned for sinks whose API says more in the body; a 3xx is refused, not
// followed; 408, 425, 429, 5xx and network failures are worth retrying, after
// the Retry-After they ask for (read with now); any other status is final.
// Errors start with what, say the status and the start of the answer, and
// never hold the URL, which may carry a credential.
func Post(c *http.Client, req *http.Request, now func() time.Time, what string) ([]byte, Result, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, Result{Retry: true}, fmt.Errorf("%s: %s", what, httpErrorText(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return answer, Result{}, nil
	case code >= 300 && code < 400:
		return nil, Result{}, fmt.Errorf("%s: HTTP %d redirect, which is not followed: point the URL at the final address", what, code)
	}
	res := Result{Retry: retryableStatus(code)}
	if res.Retry {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now())
	}
	return nil, res, fmt.Errorf("%s: HTTP %d: %s", what, code, snippet(answer))
}

// retryableStatus reports the HTTP statuses worth retrying: 408, 425, 429
// and every 5xx.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooEarly ||
		code == http.StatusTooManyRequests || code >= 500
}

// parseRetryAfter reads a Retry-After header, in seconds or as an HTTP date,
// as a wait from now; zero when absent, malformed or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(365*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// httpErrorText words a request error without its URL, which may hold
// credentials (a Slack incoming webhook is one).
func httpErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// snippet returns the start of a response body on one line, for errors.
func snippet(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, string(b))
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
