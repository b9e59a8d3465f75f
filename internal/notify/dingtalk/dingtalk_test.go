package dingtalk_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

const (
	token  = "b3f1c0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1"
	secret = "SEC8a1f5e0b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0"
)

// kit makes sinks signed with secret and fake robots of token and secret.
var kit = robottest.Kit[notifytest.DingTalkMessage]{
	Type: dingtalk.Type, Secret: secret,
	Start: func(t *testing.T, clk *clock.Fake) robottest.Robot[notifytest.DingTalkMessage] {
		return notifytest.NewDingTalk(t, token, secret, clk.Now)
	},
	// 20 messages a minute per robot, as DingTalk documents it.
	Pace: notify.Window{N: 20, Per: time.Minute},
}

func TestA200AlarmBurstToOneRobotKeeps20AMinuteAndLosesNothing(t *testing.T) {
	const n = 200
	msgs := kit.Burst(t, n, "burst%03d", "")
	robottest.About(t, msgs, "burst%03d")
	// 10 windows of 20: the last message leaves 9 windows of 61 s after the
	// first, not later.
	if took := msgs[n-1].At.Sub(msgs[0].At); took != 9*dingtalk.Window {
		t.Errorf("the burst took %s on the robot's clock, want %s", took, 9*dingtalk.Window)
	}
}

func TestTwoSinksOnOneRobotShareItsPace(t *testing.T) {
	kit.Burst(t, 60, "pair%02d", "", "title: \"{{.LevelName}} {{.OriginID}}\"\n")
}

func TestTheRobotsBlockIsWaitedOutByEverySinkOfTheRobot(t *testing.T) {
	kit.Limited(t, robottest.Limit{Fill: 20, RetryAfter: dingtalk.Block, Said: []string{"130101", "10m0s"}})
}

func TestWhatTheRobotRefusesIsDeadLetteredWithWhatToFix(t *testing.T) {
	cases := []struct {
		name      string
		secret    string // the sink's; the robot's is secret
		keywords  []string
		hook      func(robot *notifytest.DingTalk) string
		extra     string
		wantInErr []string
	}{
		{name: "wrong secret", secret: "SECwrong", wantInErr: []string{"310000", "sign not match", "secret_env", "Additional Signature"}},
		{name: "no secret for a signing robot", wantInErr: []string{"310000", "set secret_env"}},
		{name: "no keyword", secret: secret, keywords: []string{"告警"}, wantInErr: []string{"310000", "keywords not in content", "Custom Keywords", "title or text"}},
		{name: "wrong token", secret: secret, hook: func(r *notifytest.DingTalk) string { return strings.Replace(r.URL(), token, "deadbeef", 1) },
			wantInErr: []string{"300001", "url_env", "webhook URL"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
			robot.SetKeywords(c.keywords...)
			hook := robot.URL()
			if c.hook != nil {
				hook = c.hook(robot)
			}
			text, env := robottest.Options("DINGTALK", hook, c.secret, c.extra)
			s := sinktest.Build(t, dingtalk.Type, "ops", text, env, sinktype.Deps{Clock: clk, Limits: notify.NewLimits(clk)})
			kit.DeadLetter(t, clk, s, c.wantInErr, token, secret)
		})
	}
}

// TestEveryErrcodeIsClassified: DingTalk's answers, as robots give them.
func TestEveryErrcodeIsClassified(t *testing.T) {
	kit.Classify(t, "/robot/send?access_token="+token, []robottest.Answer{
		{Body: `{"errcode":0,"errmsg":"ok"}`},
		{Body: `{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`, Retry: true, RetryAfter: dingtalk.Block, WantInErr: "130101"},
		{Body: `{"errcode":410100,"errmsg":"发送速度太快而限流"}`, Retry: true, RetryAfter: dingtalk.Block, WantInErr: "410100"},
		{Body: `{"errcode":-1,"errmsg":"系统繁忙"}`, Retry: true, WantInErr: "busy"},
		{Body: `{"errcode":300005,"errmsg":"token is not exist"}`, WantInErr: "url_env"},
		{Body: `{"errcode":310000,"errmsg":"ip 203.0.113.9 not in whitelist"}`, WantInErr: "IP allowlist"},
		{Body: `{"errcode":460101,"errmsg":"message too long, exceed 20000 bytes"}`, WantInErr: "20000"},
		{Body: `{"errcode":400102,"errmsg":"机器人已停用"}`, WantInErr: "400102 (机器人已停用)"},
		{Body: `<html>gateway</html>`, WantInErr: "not DingTalk's"},
		{Body: `{"ok":true}`, WantInErr: "no errcode"},
	})
}

func TestAHugeAlarmIsCutToTheRobotsSizeAndKeepsItsMentions(t *testing.T) {
	r := kit.Rig(t, "at_mobiles: [\"13800001111\"]\nat_user_ids: [manager01]\n")
	ev := sinktest.Event("huge", 0, event.Start)
	ev.Data.EventDesc = strings.Repeat("逆变器过温 ", 6000) // 96 KB
	got := r.Only(ev)
	md := got.Body["markdown"].(map[string]any)
	body, title := md["text"].(string), md["title"].(string)
	if len(body) > dingtalk.MaxText || len(title) > dingtalk.MaxTitle {
		t.Errorf("text of %d bytes and title of %d, want at most %d and %d", len(body), len(title), dingtalk.MaxText, dingtalk.MaxTitle)
	}
	// Each upstream value is cut to sinktype.MaxValue, so the facts after
	// the description survive.
	if !strings.Contains(body, "**Alarm:** huge") || !strings.HasSuffix(body, "\n\n@13800001111 @manager01") {
		t.Errorf("the text lost the alarm's id or the mentions: ...%s", body[max(len(body)-120, 0):])
	}
	at := got.Body["at"].(map[string]any)
	if fmt.Sprint(at["atMobiles"], at["atUserIds"], at["isAtAll"]) != "[13800001111] [manager01] false" {
		t.Errorf("at = %v", at)
	}
}

func TestAFailingTemplateSendsTheDefaultAndSaysSo(t *testing.T) {
	kit.TemplateFails(t, robottest.Fallback{
		Extra: "title: \"{{.LevelName}} alarm {{.OriginID}}\"\ntext: \"{{if eq .OriginID \\\"boom\\\"}}{{index .Event.Data.Alarm 9999}}{{end}}**{{.EventCode}}** on {{.Event.Data.DeviceName}}\"\n",
		Fine:  "severe alarm fine\n**E1023** on Inverter #3",
		Default: func(text string) bool {
			return strings.Contains(text, "severe alarm boom\n### 🟠 SEVERE alarm: E1023")
		},
	})
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://oapi.dingtalk.com/robot/send?access_token=" + token
	robottest.Refused(t, dingtalk.Type, []robottest.Refusal{
		{Name: "no url_env", YAML: "secret_env: S\n", Env: map[string]string{"S": secret}, Want: "missing: a dingtalk sink needs url_env"},
		{Name: "url_env unset", YAML: "url_env: U\n", Env: nil, Want: "U"},
		{Name: "no access token", YAML: "url_env: U\n", Env: map[string]string{"U": "https://oapi.dingtalk.com/robot/send"}, Want: "no access_token"},
		{Name: "signed URL", YAML: "url_env: U\n", Env: map[string]string{"U": hook + "&timestamp=1&sign=x"}, Want: "secret in secret_env"},
		{Name: "secret that is not one", YAML: "url_env: U\nsecret_env: S\n", Env: map[string]string{"U": hook, "S": hook}, Want: "start with SEC"},
		{Name: "bad mobile", YAML: "url_env: U\nat_mobiles: [\"138 0000\"]\n", Env: map[string]string{"U": hook}, Want: "not a mobile number"},
		{Name: "unknown key", YAML: "url_env: U\nchannel: ops\n", Env: map[string]string{"U": hook}, Want: `unknown key "channel"`},
	}, token, secret)
}

func TestSummarySaysWhetherTheSinkSigns(t *testing.T) {
	hook := "https://oapi.dingtalk.com/robot/send?access_token=" + token
	for _, c := range []struct {
		yaml string
		want string
	}{
		{"url_env: U\n", "url_env: U, unsigned, paced 20 per 1m1s"},
		{"url_env: U\nsecret_env: S\nat_all: true\n", "url_env: U, secret_env: S (signed), at all, paced 20 per 1m1s"},
	} {
		cfg := sinktest.Decode(t, dingtalk.Type, c.yaml, map[string]string{"U": hook, "S": secret})
		if got := strings.Join(cfg.Summary(), ", "); got != c.want {
			t.Errorf("summary %q, want %q", got, c.want)
		}
		if got := cfg.Target(); got != "https://oapi.dingtalk.com/robot/send?…" {
			t.Errorf("target %q", got)
		}
	}
}

// The body is what DingTalk documents for a markdown message with mentions.
func TestTheBodyIsDingTalksMarkdownMessage(t *testing.T) {
	ev := sinktest.Event("a1", 2, event.Start)
	b, err := dingtalk.Body(&ev, nil, dingtalk.At{Mobiles: []string{"13800001111"}, All: true})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Title, Text string
		} `json:"markdown"`
		At struct {
			AtMobiles []string `json:"atMobiles"`
			IsAtAll   bool     `json:"isAtAll"`
		} `json:"at"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.MsgType != "markdown" || got.Markdown.Title == "" || !strings.HasSuffix(got.Markdown.Text, "\n\n@13800001111") ||
		len(got.At.AtMobiles) != 1 || !got.At.IsAtAll {
		t.Fatalf("body %s", b)
	}
}

// TestBodyStaysUnderTheLimitWhenEscapingGrowsIt: a text template that
// writes quotes and backslashes, which double when written as JSON, still
// gives a body under the limit, cut, never refused, with its mentions.
func TestBodyStaysUnderTheLimitWhenEscapingGrowsIt(t *testing.T) {
	r := kit.Rig(t, "at_mobiles: [\"13800001111\"]\ntext: '{{range 60}}{{$.Event.Data.EventDesc}}{{end}}'\n")
	ev := sinktest.Event("big1", 0, event.Start)
	ev.Data.EventDesc = strings.Repeat(`"\`, 300)
	got := r.Only(ev)
	if n := got.Size; n > dingtalk.MaxBody {
		t.Fatalf("body of %d bytes, over %d", n, dingtalk.MaxBody)
	}
	if md := got.Body["markdown"].(map[string]any); !strings.HasSuffix(md["text"].(string), "@13800001111") {
		t.Fatal("the mention was cut")
	}
}

// TestADigestMentionsOnItsFirstMessageOnly: the digest's first message
// carries the sink's mentions, as an alarm's would; its lists, up to 25
// lines under the counts, mention no one.
func TestADigestMentionsOnItsFirstMessageOnly(t *testing.T) {
	r := kit.Rig(t, "at_mobiles: ['13800000000']\n")
	dg := sinktest.DigestOf("at", 30, 2)
	r.Digest(dg, sinktest.InLists(dg.Items)...)
	got := r.Fake.Accepted()
	if len(got) != 3 {
		t.Fatalf("%d messages, want the digest and two lists", len(got))
	}
	if at, _ := got[0].Body["at"].(map[string]any); at == nil || !strings.Contains(got[0].Text(), "@13800000000") {
		t.Errorf("the digest's first message mentions no one:\n%s", got[0].Text())
	}
	for i, m := range got[1:] {
		if _, ok := m.Body["at"]; ok || strings.Contains(m.Text(), "@13800000000") {
			t.Errorf("list %d mentions someone:\n%s", i, m.Text())
		}
		if lines := strings.Count(m.Text(), "\n- "); lines != []int{25, 5}[i] {
			t.Errorf("list %d has %d lines:\n%s", i, lines, m.Text())
		}
	}
}
