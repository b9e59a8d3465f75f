package dingtalk_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// A DingTalk robot carries no buttons: a start people can acknowledge ends
// with the command, its Markdown escaped, after the default text or a text
// template (and before the mentions, which DingTalk needs in the text).
func TestAStartPeopleCanAcknowledgeEndsWithTheCommand(t *testing.T) {
	hook := "https://oapi.dingtalk.com/robot/send?access_token=" + token
	def, env := robottest.Options("DINGTALK", hook, secret, "at_mobiles: [\"13800001111\"]\n")
	tmpl, tenv := robottest.Options("DINGTALK", hook, secret, "text: '**{{.LevelName}}** {{.EventCode}}'\n")
	sinktest.AckRendering(t, dingtalk.Type,
		sinktest.AckCase{Name: "default text", Options: def, Env: env},
		sinktest.AckCase{Name: "text template", Options: tmpl, Env: tenv})
}
