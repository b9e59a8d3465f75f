package notify

import (
	"bytes"
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

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/redact"
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
//
// Redaction stops at the boundary of what is shown: the answer, returned
// or in a StatusError, is the bytes as received, since it is data a sink
// may send back (a token, a URL, an id) and a filter must never change what
// is sent. Only the error's text is cleaned of secrets (nil for none), and
// before it is cut, so that a secret a receiver echoes cannot survive in
// part; a sink that quotes the answer in an error of its own cleans the
// quote the same way (Poster.CleanText) before cutting it.
func Post(c *http.Client, req *http.Request, now func() time.Time, what string, secrets *redact.Set) ([]byte, Result, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, Result{Retry: true}, fmt.Errorf("%s: %s", what, secrets.String(httpErrorText(err)))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return answer, Result{}, nil
	case code >= 300 && code < 400:
		return nil, Result{}, &StatusError{Status: code, msg: fmt.Sprintf("%s: HTTP %d redirect, which is not followed: point the URL at the final address", what, code)}
	}
	res := Result{Retry: retryableStatus(code)}
	if res.Retry {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now())
	}
	return nil, res, &StatusError{Status: code, Answer: answer, msg: fmt.Sprintf("%s: HTTP %d: %s", what, code, snippet(secrets.String(string(answer))))}
}

// StatusError is the error Post returns for an answer that is not a 2xx:
// its status and, but for a redirect, its body (up to 64 KiB), for sinks
// whose vendor says more in an error answer than its status (Telegram's
// retry_after, PagerDuty's list of errors). Find it with errors.As. Its
// text is cleaned of the secrets given to Post; Answer is not.
type StatusError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Answer is the body of the answer, as received: an error that quotes
	// it cleans the quote first.
	Answer []byte
	msg    string
}

// Error says what was posted, the status and the start of the answer.
func (e *StatusError) Error() string { return e.msg }

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
func snippet(text string) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, text)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// Poster makes the requests of one HTTP sink: each waits for the sink's
// Limiter, is bounded by Timeout, never follows a redirect, is classified by
// Post, and fails with an error cleaned of Secrets.
type Poster struct {
	client  *http.Client
	limiter *Limiter
	clock   clock.Clock
	timeout time.Duration
	secrets *redact.Set
}

// NewPoster returns a Poster. A nil client is a new one, a nil limiter
// paces nothing, a nil clock is the real one, and a zero timeout is 10 s.
// secrets (nil for none) are cleaned from every error.
func NewPoster(client *http.Client, limiter *Limiter, clk clock.Clock, timeout time.Duration, secrets *redact.Set) *Poster {
	if clk == nil {
		clk = clock.Real()
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if secrets == nil {
		secrets = redact.New()
	}
	return &Poster{client: NoRedirects(client), limiter: limiter, clock: clk, timeout: timeout, secrets: secrets}
}

// PostJSON posts body as JSON to url, with the extra header, and returns the
// answer of a 2xx (up to 64 KiB) as received, as Post does. what starts
// every error, such as
// `dingtalk sink "ops": post of a1:start`.
func (p *Poster) PostJSON(ctx context.Context, what, url string, body []byte, header http.Header) ([]byte, Result, error) {
	if p.limiter != nil {
		if err := p.limiter.Wait(ctx); err != nil {
			return nil, WaitResult(err), fmt.Errorf("%s: waiting for the destination's rate limit: %w", what, err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, Result{}, fmt.Errorf("%s: cannot build the request: check the URL", what)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	answer, res, err := Post(p.client, req, p.clock.Now, what, p.secrets)
	return answer, res, p.secrets.Error(err)
}

// WaitResult is the Result of an attempt that Limiter.Wait ended: retried,
// after the wait a *WaitError names.
func WaitResult(err error) Result {
	res := Result{Retry: true}
	if we, ok := errors.AsType[*WaitError](err); ok {
		res.RetryAfter = we.Wait
	}
	return res
}

// Clean removes the secrets from err, for the errors a sink words itself.
func (p *Poster) Clean(err error) error { return p.secrets.Error(err) }

// CleanText removes the secrets from text, words of an answer that an error
// is about to quote. Call it before cutting the text, so that no piece of a
// secret survives the cut; never on what is sent.
func (p *Poster) CleanText(text string) string { return p.secrets.String(text) }

// Limiter returns the Poster's limiter, for sinks that must hold it back
// after a rate-limit answer; nil when it paces nothing.
func (p *Poster) Limiter() *Limiter { return p.limiter }
