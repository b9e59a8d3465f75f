package dingtalk_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

const (
	token  = "b3f1c0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1"
	secret = "SEC8a1f5e0b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: dingtalk.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
			base, _, _ := strings.Cut(robot.URL(), "/robot/")
			return sinktest.Vendor{
				URL: base,
				Options: func(base string) (string, map[string]string) {
					return "url_env: DINGTALK_URL\nsecret_env: DINGTALK_SECRET\n",
						map[string]string{"DINGTALK_URL": base + "/robot/send?access_token=" + token, "DINGTALK_SECRET": secret}
				},
				Received: func() []string {
					var out []string
					for _, m := range robot.Accepted() {
						out = append(out, m.Text())
					}
					return out
				},
			}
		},
	})
}
