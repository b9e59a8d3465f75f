package teams_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/teams"
)

const sig = "Jq2dHk7_x9LmN0pQ-rS3tUvWxYz4AbCdEfGhIjKlMnO"

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: teams.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			flow := notifytest.NewTeams(t, sig, clk.Now)
			base, rest, _ := strings.Cut(flow.URL(), "/workflows/")
			return sinktest.Vendor{
				URL: base,
				Options: func(base string) (string, map[string]string) {
					return "url_env: TEAMS_URL\n", map[string]string{"TEAMS_URL": base + "/workflows/" + rest}
				},
				Received: func() []string {
					var out []string
					for _, m := range flow.Accepted() {
						out = append(out, m.Text())
					}
					return out
				},
			}
		},
	})
}
