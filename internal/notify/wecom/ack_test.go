package wecom_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// A WeCom robot carries no buttons: a start people can acknowledge ends
// with the command, escaped for WeCom's Markdown, after the default text or
// a text template.
func TestAStartPeopleCanAcknowledgeEndsWithTheCommand(t *testing.T) {
	hook := "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=" + key
	def, env := robottest.Options("WECOM", hook, "", "mention_user_ids: [zhangsan]\n")
	tmpl, tenv := robottest.Options("WECOM", hook, "", "text: '**{{.LevelName}}** {{.EventCode}}'\n")
	sinktest.AckRendering(t, wecom.Type,
		sinktest.AckCase{Name: "default text", Options: def, Env: env},
		sinktest.AckCase{Name: "text template", Options: tmpl, Env: tenv})
}
