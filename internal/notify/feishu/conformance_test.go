package feishu_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

const (
	token  = "5c1e7f2a-93d4-4b8e-a6f0-2d7c9b1e4a38"
	secret = "qW3rT9yU1iO5pA7sD2fG4h"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: feishu.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			bot := notifytest.NewFeishu(t, token, secret, clk.Now)
			base, _, _ := strings.Cut(bot.URL(), feishu.HookPath)
			return sinktest.Vendor{
				URL: base,
				Options: func(base string) (string, map[string]string) {
					return "url_env: FEISHU_URL\nsecret_env: FEISHU_SECRET\n",
						map[string]string{"FEISHU_URL": base + feishu.HookPath + token, "FEISHU_SECRET": secret}
				},
				Received: func() []string {
					var out []string
					for _, m := range bot.Accepted() {
						out = append(out, m.Text())
					}
					return out
				},
			}
		},
	})
}
