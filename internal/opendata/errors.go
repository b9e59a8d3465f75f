package opendata

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/termtext"
)

// Kind says what a caller should do about a failed request.
type Kind int

// The kinds of upstream failure (docs/design.md §3).
const (
	// KindAuth: the credentials or the token were refused. The client has
	// already logged in again once; retrying needs new credentials or time.
	KindAuth Kind = iota + 1
	// KindRateLimited: the upstream refused the request for exceeding its
	// rate limit. The client has already halved its own rate.
	KindRateLimited
	// KindBadRequest: the request is wrong; retrying it unchanged fails again.
	KindBadRequest
	// KindTransient: a server-side, third-party or network failure, or a
	// malformed or truncated answer; retry with backoff.
	KindTransient
)

// String returns the kind's name, as used in errors, logs and metrics.
func (k Kind) String() string {
	switch k {
	case KindAuth:
		return "auth"
	case KindRateLimited:
		return "rate_limited"
	case KindBadRequest:
		return "bad_request"
	case KindTransient:
		return "transient"
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Sentinels matched by errors.Is against an *Error of the same Kind.
var (
	ErrAuth        = errors.New("opendata: authentication refused")
	ErrRateLimited = errors.New("opendata: rate limited")
	ErrBadRequest  = errors.New("opendata: bad request")
	ErrTransient   = errors.New("opendata: transient failure")
	// ErrCredentials is the cause of a login the upstream refused for its
	// credentials: retrying will not help until they are changed.
	ErrCredentials = errors.New("login refused: check RELAY_APP_ID and RELAY_APP_SECRET")
)

// credentialWords mark a failed login's description or errorMsg as a refusal
// of the credentials. The spec's only sample of a wrong appSecret is code
// C0001 ("error calling a third-party service") with errorMsg
// "authentication failed", a code that elsewhere means a transient failure.
var credentialWords = []string{"auth", "credential", "secret", "appid", "app id", "password",
	"认证", "鉴权", "授权", "密钥", "凭证"}

// refusesCredentials reports whether a failed login answer refused the
// credentials, as opposed to failing for a reason that passes.
func refusesCredentials(e *Error) bool {
	if e.Kind == KindAuth {
		return true
	}
	if e.Code == "" || e.Kind == KindRateLimited {
		return false
	}
	text := strings.ToLower(e.ErrorMsg + " " + e.Description + " " + e.ErrorKey)
	for _, w := range credentialWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

func (k Kind) sentinel() error {
	switch k {
	case KindAuth:
		return ErrAuth
	case KindRateLimited:
		return ErrRateLimited
	case KindBadRequest:
		return ErrBadRequest
	case KindTransient:
		return ErrTransient
	}
	return nil
}

// Error is a failed upstream request, or a request refused before sending.
// errors.Is matches it against the sentinel of its Kind and against Err. No
// field holds the app secret or a token.
type Error struct {
	// Endpoint is the spec's name of the endpoint, such as "getAlarmList".
	Endpoint string
	Kind     Kind
	// HTTPStatus is the answer's status; 0 when no answer arrived.
	HTTPStatus int
	// Code, Description, ErrorMsg and ErrorKey are the envelope's fields,
	// when the answer had an envelope.
	Code        string
	Description string
	ErrorMsg    string
	ErrorKey    string
	// RetryAfter is the wait the upstream asked for, from Retry-After.
	RetryAfter time.Duration
	// Err is the underlying cause: a network, decoding or context error.
	Err error
}

// Error returns one line naming the endpoint, what the upstream said and the
// kind, such as `opendata: getAlarmList: code A0501 "too many requests"
// (rate_limited, retry after 30s)`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("opendata: ")
	b.WriteString(e.Endpoint)
	b.WriteString(":")
	if e.HTTPStatus != 0 && (e.HTTPStatus < 200 || e.HTTPStatus > 299) {
		fmt.Fprintf(&b, " HTTP %d", e.HTTPStatus)
	}
	// Code and messages are the upstream's text, escaped: the line is
	// printed and logged as it is.
	if e.Code != "" {
		fmt.Fprintf(&b, " code %s", termtext.Escape(e.Code))
	}
	if e.Description != "" {
		fmt.Fprintf(&b, " \"%s\"", termtext.Escape(e.Description))
	}
	if e.ErrorMsg != "" && e.ErrorMsg != e.Description {
		fmt.Fprintf(&b, " (%s)", termtext.Escape(e.ErrorMsg))
	}
	if e.Err != nil {
		b.WriteString(" ")
		b.WriteString(e.Err.Error())
	}
	fmt.Fprintf(&b, " (%s", e.Kind)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %s", e.RetryAfter)
	}
	b.WriteString(")")
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's Kind.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && target == s
}

// codeSuccess is the envelope code of a successful answer.
const codeSuccess = "00000"

// kindOfCode classifies a non-success envelope code by the Alibaba catalogue
// the spec's one sample follows: A = caller side, B = system, C = third party.
// A code that fits none of them is treated as transient, so that the caller
// retries with backoff rather than giving up on an answer it cannot read.
func kindOfCode(code string) Kind {
	c := strings.ToUpper(strings.TrimSpace(code))
	switch {
	case strings.HasPrefix(c, "A02"), strings.HasPrefix(c, "A03"):
		return KindAuth
	case strings.HasPrefix(c, "A05"):
		return KindRateLimited
	case strings.HasPrefix(c, "A"):
		return KindBadRequest
	}
	return KindTransient
}

// kindOfStatus classifies a non-2xx HTTP status, and reports false for a
// status it has no rule for.
func kindOfStatus(status int) (Kind, bool) {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return KindAuth, true
	case status == http.StatusTooManyRequests:
		return KindRateLimited, true
	case status >= 500:
		return KindTransient, true
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After value, in seconds or as an HTTP date,
// relative to now, capped at maxRetryAfter; it returns 0 when the value is
// absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		switch {
		case !(s > 0): // also NaN
			return 0
		case s >= maxRetryAfter.Seconds():
			return maxRetryAfter
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, min(maxRetryAfter, t.Sub(now)))
	}
	return 0
}
