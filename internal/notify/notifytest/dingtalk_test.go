package notifytest

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postDingTalkBody posts body to the robot, signed with secret unless it is
// empty, and returns the robot's errcode.
func postDingTalkBody(t *testing.T, d *DingTalk, secret string, at time.Time, body string) int {
	t.Helper()
	hook := d.URL()
	if secret != "" {
		ts := strconv.FormatInt(at.UnixMilli(), 10)
		hook += "&timestamp=" + ts + "&sign=" + url.QueryEscape(dingTalkSign(secret, ts))
	}
	code, _ := post(t, hook, body)
	return code
}

func dingTalkMarkdown(title, text string) string {
	b, _ := json.Marshal(map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": title, "text": text}})
	return string(b)
}

func TestDingTalkFakeChecksTheMessage(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	d := NewDingTalk(t, "robot-token", "SECright", func() time.Time { return now })
	cases := []struct {
		name string
		body string
		code int
	}{
		{"markdown", dingTalkMarkdown("alarm", "## alarm"), DingTalkOK},
		{"markdown without a title", dingTalkMarkdown("", "## alarm"), DingTalkBadBody},
		{"markdown without a text", dingTalkMarkdown("alarm", ""), DingTalkBadBody},
		{"text", `{"msgtype":"text","text":{"content":"alarm"}}`, DingTalkOK},
		{"unknown msgtype", `{"msgtype":"card"}`, DingTalkBadType},
		{"not JSON", `{"msgtype"`, DingTalkBadBody},
		{"over 20000 bytes", dingTalkMarkdown("alarm", strings.Repeat("a", 20000)), DingTalkTooLong},
	}
	for _, c := range cases {
		if code := postDingTalkBody(t, d, "SECright", now, c.body); code != c.code {
			t.Errorf("%s: errcode %d, want %d", c.name, code, c.code)
		}
	}
	got := d.Accepted()
	if len(got) != 2 || got[0].Text() != "alarm\n## alarm" || got[1].Text() != "alarm" {
		t.Errorf("accepted %d messages %v, want the markdown and the text", len(got), got)
	}
}

func TestDingTalkFakeWithKeywordsRefusesAMessageWithoutOne(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	d := NewDingTalk(t, "robot-token", "", func() time.Time { return now })
	d.SetKeywords("告警", "alarm")
	if code := postDingTalkBody(t, d, "", now, dingTalkMarkdown("故障", "设备告警")); code != DingTalkOK {
		t.Errorf("unsigned message with a keyword to a robot without a secret: errcode %d, want 0", code)
	}
	if code := postDingTalkBody(t, d, "", now, dingTalkMarkdown("fault", "device down")); code != DingTalkBadSign {
		t.Errorf("message without a keyword: errcode %d, want %d", code, DingTalkBadSign)
	}
}
