package teams_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/teams"
)

// A Workflows card carries no buttons that reach relay: a start people can
// acknowledge ends with the command, escaped for the card's Markdown, as
// the card's last text block (the default card has no text besides its
// facts) or after a text template.
func TestAStartPeopleCanAcknowledgeEndsWithTheCommand(t *testing.T) {
	hook := "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + sig
	def, env := robottest.Options("TEAMS", hook, "", "")
	tmpl, tenv := robottest.Options("TEAMS", hook, "", "text: '**{{.LevelName}}** {{.EventCode}}'\n")
	sinktest.AckRendering(t, teams.Type,
		sinktest.AckCase{Name: "default text", Options: def, Env: env},
		sinktest.AckCase{Name: "text template", Options: tmpl, Env: tenv})
}
