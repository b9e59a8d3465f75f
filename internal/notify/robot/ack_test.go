package robot_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/teams"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// Every chat robot's message ends a start people can acknowledge with the
// command, escaped as the robot's names are, and shows nothing of it on a
// start without one: the robot base asks for the line, whatever the
// vendor's payload. (Each vendor's package holds the golden rendering; this
// covers Feishu's webhook mode as well.)
func TestEveryRobotEndsAStartPeopleCanAcknowledgeWithTheCommand(t *testing.T) {
	for _, c := range []struct {
		typ    sinktype.Type
		hook   string
		escape func(string) string
	}{
		{dingtalk.Type, "https://oapi.dingtalk.com/robot/send?access_token=t0k3n", dingtalk.Escape},
		{feishu.Type, "https://open.feishu.cn/open-apis/bot/v2/hook/5c1e7f2a-93d4-4b8e-a6f0-2d7c9b1e4a38", feishu.Escape},
		{wecom.Type, "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7c3e-4bc4-97a0-0ec2f1a5aa5e", wecom.Escape},
		{teams.Type, "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=s1g", teams.Escape},
	} {
		t.Run(c.typ.Name, func(t *testing.T) {
			text, env := robottest.Options("HOOK", c.hook, "", "")
			cfg := sinktest.Decode(t, c.typ, text, env)
			ev := sinktest.Event("a1", 0, event.Start)
			plain := render(t, cfg, &ev)
			if strings.Contains(plain, "To acknowledge") {
				t.Fatalf("a start without a command shows one:\n%s", plain)
			}
			ev.Data.AckCommand = sinktest.AckCommand
			line := c.escape("To acknowledge: " + sinktest.AckCommand)
			if got := render(t, cfg, &ev); !strings.Contains(got, line) {
				t.Errorf("the start does not show %q:\n%s", line, got)
			}
		})
	}
}

// render returns the text of the one request cfg renders for ev, its JSON
// decoded so that escapes of JSON do not hide what the robot shows.
func render(t *testing.T, cfg sinktype.Config, ev *event.Event) string {
	t.Helper()
	reqs, err := cfg.Render(ev)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("render: %d requests, %v", len(reqs), err)
	}
	var body any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(body)
	return strings.Join(texts, "\n")
}
