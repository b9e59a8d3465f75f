package wecom_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

const key = "693a91f6-7c3e-4bc4-97a0-0ec2f1a5aa5e"

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: wecom.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			robot := notifytest.NewWeCom(t, key, clk.Now)
			base, _, _ := strings.Cut(robot.URL(), "/cgi-bin/")
			return sinktest.Vendor{
				URL: base,
				Options: func(base string) (string, map[string]string) {
					return "url_env: WECOM_URL\nmention_user_ids: [zhangsan]\n",
						map[string]string{"WECOM_URL": base + "/cgi-bin/webhook/send?key=" + key}
				},
				Received: func() []string {
					var out []string
					for _, m := range robot.Accepted() {
						out = append(out, m.Content)
					}
					return out
				},
			}
		},
	})
}
