package redact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/redact"
)

type stringer string

func (s stringer) String() string { return string(s) }

func TestHandlerCleansMessagesAttributesErrorsAndGroups(t *testing.T) {
	set := redact.New("hunter2-secret", "x")
	set.AddURL("https://relay:url-password@example.test/hook?key=query-secret", false)
	set.AddHeader("Basic " + "cmVsYXk6YmFzaWMtcGFzcw==") // relay:basic-pass
	var buf bytes.Buffer
	log := slog.New(set.Handler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log = log.With("conn", "nats://relay:url-password@host")
	log.Debug("login with hunter2-secret", "err", fmt.Errorf("POST failed: %w", context.Canceled),
		"body", "appSecret=hunter2-secret", "url", stringer("https://h/?key=query-secret"),
		slog.Group("g", "h", "basic-pass"), "any", map[string]string{"k": "hunter2-secret"}, "n", 42)
	out := buf.String()
	for _, s := range []string{"hunter2-secret", "url-password", "query-secret", "basic-pass"} {
		if strings.Contains(out, s) {
			t.Errorf("log holds %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, redact.Mark) || !strings.Contains(out, `"n":42`) || !strings.Contains(out, "x") {
		t.Errorf("log lost what is not secret, or short values were taken as secrets:\n%s", out)
	}
}

func TestErrorKeepsTheChainAndHidesTheText(t *testing.T) {
	set := redact.New("hunter2-secret")
	err := set.Error(fmt.Errorf("dial with hunter2-secret: %w", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the cleaned error does not match its cause")
	}
	for _, text := range []string{err.Error(), fmt.Sprintf("%v %+v %#v %s", err, err, err, err)} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("%q holds the secret", text)
		}
	}
	plain := errors.New("nothing secret")
	if set.Error(plain) != plain || set.Error(nil) != nil {
		t.Error("an error without secrets should come back as it is")
	}
	var none *redact.Set
	if none.String("a hunter2-secret") != "a hunter2-secret" {
		t.Error("a nil set should redact nothing")
	}
}

func TestURLQueryValuesAreHiddenAsWrittenAndDecoded(t *testing.T) {
	set := redact.New()
	set.AddURL("https://h.test/hook?key=ab/+cd%3Def&x=1", false)
	for _, text := range []string{"GET /hook?key=ab/+cd%3Def", "key ab/ cd=ef"} {
		if got := set.String(text); strings.Contains(got, "cd") {
			t.Errorf("%q became %q", text, got)
		}
	}
}
