package feishu_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// TestConformanceApp runs the suite on app mode: its golden rendering is
// testdata/render-app.golden.
func TestConformanceApp(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: feishu.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			api := notifytest.NewFeishuApp(t, appID, appSecret, chat)
			// Each card sent or updated, as the chat shows it: an end
			// updates its start's card rather than posting one.
			texts := func() []string {
				var out []string
				for _, c := range api.Calls() {
					if c.Code == 0 {
						out = append(out, notifytest.CardText(c.Card))
					}
				}
				return out
			}
			return sinktest.Vendor{
				URL: api.URL(),
				Options: func(base string) (string, map[string]string) {
					return "app_id_env: FEISHU_APP_ID\napp_secret_env: FEISHU_APP_SECRET\nchat_id: " + chat + "\napi_url: " + base + "\n", appEnv
				},
				Received: texts,
			}
		},
	})
}
