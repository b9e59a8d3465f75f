// Package redacttest holds the leak check that every component writing
// errors, log lines or metrics from configured secrets runs in its tests:
// the sinks, the upstream client and the whole relay.
package redacttest

import (
	"net/url"
	"strings"
	"testing"
)

// AssertNoSecret fails t for each secret found in any of texts, which are
// keyed by where they come from (an error, the log, a dead letter, the
// metrics). Each secret is also looked for in its URL-escaped forms. It is
// the check every sink type and the upstream client run, as Alertmanager's
// AssertNotifyLeaksNoSecret does for its notifiers.
func AssertNoSecret(t testing.TB, secrets []string, texts map[string]string) {
	t.Helper()
	for _, secret := range secrets {
		if len(secret) < 4 {
			t.Fatalf("secret %q is too short to look for", secret)
		}
		for where, text := range texts {
			for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
				if strings.Contains(text, form) {
					t.Errorf("%s holds the secret %q:\n%s", where, secret, text)
					break
				}
			}
		}
	}
}
