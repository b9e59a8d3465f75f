package console_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/console"
)

// TestHideURLPathsLeavesScemeAndHostOnly settles the suspicion of webhook
// URLs whose path is the secret (Discord, Zapier): before the fix the
// System page showed a webhook sink's target with its path
// ("https://discord.example.com/api/webhooks/123/<token>") and error texts
// with it too. Now every URL a page shows is cut to its scheme and host.
func TestHideURLPathsLeavesScemeAndHostOnly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://discord.example.com/api/webhooks/123/T0KEN-secret", "https://discord.example.com/…"},
		{"POST https://hooks.zapier.example.com/hooks/catch/1/abc/?x=1: HTTP 500", "POST https://hooks.zapier.example.com/…: HTTP 500"},
		{`Post "https://u:p4ss@hook.example.com:8443/k": dial tcp`, `Post "https://hook.example.com:8443/…": dial tcp`},
		{"webhook https://hook.example.com", "webhook https://hook.example.com"},
		{"subject alarms.> on nats://nats:4222/", "subject alarms.> on nats://nats:4222"},
		{"no URL here", "no URL here"},
	} {
		if got := console.HideURLPaths(tc.in); got != tc.want {
			t.Errorf("HideURLPaths(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
