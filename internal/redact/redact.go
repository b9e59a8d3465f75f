// Package redact keeps configured secrets out of every text relay writes: log
// lines, errors, dead-letter reasons. A Set holds the secret values; its
// Handler wraps a slog.Handler so that no log line of any component can carry
// one, and its String and Error clean a text or an error before it is shown
// or stored.
package redact

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Mark replaces every secret value.
const Mark = "[redacted]"

// minLen is the length under which a value is not taken as a secret:
// replacing every "1" or "on" in the logs would hide more than it protects.
const minLen = 4

// Set is a set of secret values, safe for concurrent use. The zero value is
// empty and ready; a nil *Set redacts nothing.
type Set struct {
	mu      sync.RWMutex
	secrets []string // longest first, so that a secret containing another goes whole
}

// New returns a Set holding secrets.
func New(secrets ...string) *Set {
	s := &Set{}
	s.Add(secrets...)
	return s
}

// Add adds secret values, and the forms they take in URLs and in HTTP Basic
// credentials. Empty and very short values are left out.
func (s *Set) Add(secrets ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range secrets {
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if len(form) >= minLen && !slices.Contains(s.secrets, form) {
				s.secrets = append(s.secrets, form)
			}
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
}

// AddURL adds the secret parts of a URL: the password of its userinfo, the
// values of its query, and, when withPath, its path (as Slack's incoming
// webhook URLs carry their credential in the path).
func (s *Set) AddURL(raw string, withPath bool) {
	u, err := url.Parse(raw)
	if err != nil {
		s.Add(raw)
		return
	}
	if p, ok := u.User.Password(); ok {
		s.Add(p, u.User.String(), base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+p)))
	}
	for _, vs := range u.Query() {
		s.Add(vs...)
	}
	// The values as written too: "+" decodes to a space, and a receiver
	// echoes the URL as it was sent.
	for kv := range strings.SplitSeq(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			s.Add(v)
		}
	}
	if withPath && strings.Trim(u.Path, "/") != "" {
		s.Add(strings.TrimPrefix(u.Path, "/"))
	}
}

// AddHeader adds a header value as a secret, and the credential of an
// "Authorization: <scheme> <credential>" value on its own, decoded too when
// it is Basic.
func (s *Set) AddHeader(value string) {
	s.Add(value)
	if scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " "); ok {
		cred = strings.TrimSpace(cred)
		s.Add(cred)
		if strings.EqualFold(scheme, "Basic") {
			if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
				if _, pw, ok := strings.Cut(string(dec), ":"); ok {
					s.Add(pw)
				}
			}
		}
	}
}

// Values returns the values the set holds, longest first, for tests that
// look for each of them.
func (s *Set) Values() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.secrets)
}

// Len returns how many values the set holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.secrets)
}

// String returns text with every secret replaced by Mark.
func (s *Set) String(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.secrets {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Mark)
		}
	}
	return text
}

// Error returns err, or when its text holds a secret, an error with the
// cleaned text that still matches err's chain with errors.Is and errors.As.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &redacted{msg: clean, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Format prints the cleaned text whatever the verb, so that %+v or %#v
// cannot reach the original.
func (e *redacted) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(e.msg)) }

// Handler returns h with the message and every attribute of each record
// cleaned of the set's secrets.
func (s *Set) Handler(h slog.Handler) slog.Handler { return &handler{h: h, s: s} }

type handler struct {
	h slog.Handler
	s *Set
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if h.s.Len() == 0 {
		return h.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, h.s.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(clean), s: h.s}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), s: h.s}
}

// attr cleans one attribute: strings, errors, Stringers and anything else
// formatted as text; groups member by member.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.s.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, m := range g {
			clean[i] = h.attr(m)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case nil:
			return a
		case error:
			return slog.Any(a.Key, h.s.Error(x))
		case fmt.Stringer:
			return slog.String(a.Key, h.s.String(x.String()))
		default:
			text := fmt.Sprint(x)
			if clean := h.s.String(text); clean != text {
				return slog.String(a.Key, clean)
			}
		}
	}
	return a
}
