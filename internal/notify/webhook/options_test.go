package webhook_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

func TestConcurrencyOption(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string // the summary, or the problem
	}{
		{"default", "url: https://hooks.example/in\n", "unsigned, timeout 10s, concurrency 8"},
		{"one at a time", "url: https://hooks.example/in\nconcurrency: 1\n", "unsigned, timeout 10s, concurrency 1"},
		{"the most", "url: https://hooks.example/in\nconcurrency: 64\n", "unsigned, timeout 10s, concurrency 64"},
		{"zero", "url: https://hooks.example/in\nconcurrency: 0\n", "rules.yaml:2: sinks[0].concurrency: 0 is out of range: want 1 (one request at a time) to 64 requests in flight at once"},
		{"too many", "url: https://hooks.example/in\nconcurrency: 65\n", "65 is out of range: want 1 (one request at a time) to 64"},
		{"negative", "url: https://hooks.example/in\nconcurrency: -2\n", "-2 is out of range"},
		{"a word", "url: https://hooks.example/in\nconcurrency: eight\n", "sinks[0].concurrency: want a whole number from 1 (one request at a time) to 64, got a string"},
		{"a fraction", "url: https://hooks.example/in\nconcurrency: 2.5\n", "want a whole number from 1 (one request at a time) to 64, got a number"},
		{"a list", "url: https://hooks.example/in\nconcurrency: [8]\n", "got a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := sinktest.DecodeErr(webhook.Type, c.yaml, nil)
			if err != nil {
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("problem %q, want one saying %q", err, c.want)
				}
				return
			}
			if got := strings.Join(cfg.Summary(), ", "); got != c.want {
				t.Fatalf("summary %q, want %q", got, c.want)
			}
		})
	}
}

func TestNewRefusesConcurrencyOutOfRange(t *testing.T) {
	for _, n := range []int{-1, webhook.MaxConcurrency + 1} {
		_, err := webhook.New(webhook.Config{Name: "ops", URL: "https://hooks.example/in", Concurrency: n})
		if err == nil || !strings.Contains(err.Error(), `webhook sink "ops": concurrency`) || !strings.Contains(err.Error(), "want 1 (one request at a time) to 64") {
			t.Errorf("concurrency %d: %v, want an error naming the range", n, err)
		}
	}
}
