package feishu_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

const (
	token  = "5c1e7f2a-93d4-4b8e-a6f0-2d7c9b1e4a38"
	secret = "qW3rT9yU1iO5pA7sD2fG4h"
)

// kit makes sinks signed with secret and fake bots of token and secret.
var kit = robottest.Kit[notifytest.FeishuMessage]{
	Type: feishu.Type, Secret: secret,
	Start: func(t *testing.T, clk *clock.Fake) robottest.Robot[notifytest.FeishuMessage] {
		return notifytest.NewFeishu(t, token, secret, clk.Now)
	},
	// 5 messages a second per bot, as Feishu's custom bot guide gives it.
	Pace: notify.Window{N: 5, Per: time.Second},
}

// build decodes the options and builds a sink named name on clk, pacing with
// limits (shared by the sinks of one relay).
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, text string, env map[string]string) notify.Sink {
	t.Helper()
	return sinktest.Build(t, feishu.Type, name, text, env, sinktype.Deps{Clock: clk, Limits: limits})
}

// TestABurstOf30ToOneBotKeeps5ASecondAndIsNeverRefused: two sinks of one
// bot, as two routes to one group would have.
func TestABurstOf30ToOneBotKeeps5ASecondAndIsNeverRefused(t *testing.T) {
	robottest.About(t, kit.Burst(t, 30, "burst%02d", "", ""), "burst%02d")
}

func TestTheBotsFrequencyLimitIsWaitedOutByEverySinkOfTheBot(t *testing.T) {
	kit.Limited(t, robottest.Limit{Fill: 5, RetryAfter: feishu.Block, Said: []string{"11232"}})
}

func TestAHugeAlarmStillSendsACardUnder20KB(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra string
		grow  func(ev *event.Event)
	}{
		{"huge description", "", func(ev *event.Event) { ev.Data.EventDesc = strings.Repeat("逆变器过温 <*_*> ", 4000) }},
		{"huge device name", "", func(ev *event.Event) { ev.Data.DeviceName = strings.Repeat("PCS \"1\" ", 9000) }},
		{"huge templated text", "text: '{{.Event.Data.EventDesc}} {{.Event.Data.EventDesc}} {{.OriginID}}'\n",
			func(ev *event.Event) { ev.Data.EventDesc = strings.Repeat("\u0001\"<>", 3000) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := sinktest.Event("huge", 0, event.Start)
			c.grow(&ev)
			got := kit.Rig(t, c.extra).Only(ev)
			if got.Size > feishu.MaxBody {
				t.Errorf("body of %d bytes, want at most %d", got.Size, feishu.MaxBody)
			}
			if c.extra != "" && got.Size < feishu.MaxBody-1024 {
				t.Errorf("body of %d bytes: the text was cut further than %d bytes need", got.Size, feishu.MaxBody)
			}
			if c.extra == "" && !strings.Contains(got.Text(), "**Alarm:** huge") {
				t.Errorf("the cut card lost the alarm's facts:\n%s", got.Text()[len(got.Text())-300:])
			}
		})
	}
}

func TestWhatTheBotRefusesIsDeadLetteredWithWhatToFix(t *testing.T) {
	cases := []struct {
		name      string
		secret    string // the sink's; the bot's is secret
		skew      time.Duration
		hook      func(bot *notifytest.Feishu) string
		wantInErr []string
	}{
		{name: "wrong secret", secret: "wrong-secret-0000", wantInErr: []string{"19021", "secret_env", "clock"}},
		{name: "clock two hours off", secret: secret, skew: 2 * time.Hour, wantInErr: []string{"19021", "clock", "2026-11-21T10:00:00Z"}},
		{name: "no secret for a signing bot", wantInErr: []string{"19021", "set secret_env"}},
		{name: "wrong token", secret: secret, hook: func(b *notifytest.Feishu) string {
			return strings.Replace(b.URL(), token, "0e6a1b2c-dead-beef-0000-000000000000", 1)
		},
			wantInErr: []string{"19001", "url_env", "webhook URL"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			botClock := clock.NewFake(sinktest.Epoch)
			bot := notifytest.NewFeishu(t, token, secret, botClock.Now)
			clk := clock.NewFake(sinktest.Epoch.Add(c.skew))
			hook := bot.URL()
			if c.hook != nil {
				hook = c.hook(bot)
			}
			text, env := robottest.Options("FEISHU", hook, c.secret, "")
			kit.DeadLetter(t, clk, build(t, "ops", clk, notify.NewLimits(clk), text, env), c.wantInErr, token, secret)
		})
	}
}

// TestEveryAnswerIsClassified: Feishu's answers, of both formats, with the
// codes of its custom bot guide and of the open platform's table.
func TestEveryAnswerIsClassified(t *testing.T) {
	kit.Classify(t, feishu.HookPath+token, []robottest.Answer{
		{Body: `{"code":0,"msg":"success","data":{}}`},
		{Body: `{"StatusCode":0,"StatusMessage":"success","code":0,"msg":"success"}`},
		{Body: `{"Extra":null,"StatusCode":0,"StatusMessage":"success"}`},
		{Body: `{"code":11232,"msg":"frequency limited"}`, Retry: true, RetryAfter: feishu.Block, WantInErr: "11232"},
		{Body: `{"code":1500,"msg":"internal error"}`, Retry: true, WantInErr: "inside"},
		{Body: `{"code":9499,"msg":"Bad Request"}`, WantInErr: "templates"},
		{Body: `{"StatusCode":9499,"StatusMessage":"fail to parse content"}`, WantInErr: "9499 (fail to parse content)"},
		{Body: `{"code":19002,"msg":"param invalid: msg_type"}`, WantInErr: "19002"},
		{Body: `{"code":19022,"msg":"Ip Not Allowed"}`, WantInErr: "IP allowlist"},
		{Body: `{"code":19024,"msg":"Key Words Not Found"}`, WantInErr: "keywords"},
		{Body: `{"code":230001,"msg":"unknown"}`, WantInErr: "does not know"},
		{Body: `<html>gateway</html>`, WantInErr: "not Feishu's"},
		{Body: `{"ok":true}`, WantInErr: "no code"},
	})
}

func TestTheCardIsColouredByLevelAndOutcome(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, "", clk.Now)
	text, env := robottest.Options("FEISHU", bot.URL(), "", "")
	robottest.SendAll(t, clk, build(t, "ops", clk, notify.NewLimits(clk), text, env), robottest.Shades()...)
	var got []string
	for _, m := range bot.Accepted() {
		if m.Body["msg_type"] != "interactive" {
			t.Errorf("msg_type %v, want interactive", m.Body["msg_type"])
		}
		got = append(got, m.Template())
	}
	if want := "red orange yellow blue green grey"; strings.Join(got, " ") != want {
		t.Errorf("header colours %q, want %q", strings.Join(got, " "), want)
	}
}

func TestUpstreamNamesCannotBreakTheCardsMarkdown(t *testing.T) {
	r := kit.Rig(t, "title: '{{.Event.Data.DeviceName}} {{.LevelName}}'\ntext: '**{{.EventCode}}** on {{.Event.Data.DeviceName}}'\n")
	ev := sinktest.Event("md", 1, event.Start)
	ev.Data.DeviceName = "**PCS** [x](http://evil.example) <at id=all></at>\nline ~~2~~ `c`"
	m := r.Only(ev)
	want := "**PCS** [x](http://evil.example) <at id=all></at> line ~~2~~ `c` severe\n" +
		"**E1023** on &#42;&#42;PCS&#42;&#42; &#91;x&#93;(http://evil.example) &lt;at id=all&gt;&lt;/at&gt; line &#126;&#126;2&#126;&#126; &#96;c&#96;"
	if got := m.Text(); got != want {
		t.Errorf("card:\n%s\nwant:\n%s", got, want)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://open.feishu.cn/open-apis/bot/v2/hook/" + token
	robottest.Refused(t, feishu.Type, []robottest.Refusal{
		{Name: "no url_env", YAML: "secret_env: S\n", Env: map[string]string{"S": secret}, Want: "missing: a feishu sink needs url_env"},
		{Name: "url_env unset", YAML: "url_env: U\n", Env: nil, Want: "U"},
		{Name: "not a bot's webhook", YAML: "url_env: U\n", Env: map[string]string{"U": "https://open.feishu.cn/open-apis/im/v1/messages"}, Want: "/open-apis/bot/v2/hook/<token>"},
		{Name: "no token", YAML: "url_env: U\n", Env: map[string]string{"U": "https://open.feishu.cn/open-apis/bot/v2/hook/"}, Want: "/open-apis/bot/v2/hook/<token>"},
		{Name: "secret that is not one", YAML: "url_env: U\nsecret_env: S\n", Env: map[string]string{"U": hook, "S": hook}, Want: "signing secret"},
		{Name: "bad template", YAML: "url_env: U\ntext: '{{.Nope'\n", Env: map[string]string{"U": hook}, Want: "bad template"},
		{Name: "unknown key", YAML: "url_env: U\nchannel: ops\n", Env: map[string]string{"U": hook}, Want: `unknown key "channel"`},
	}, token, secret)
}

func TestALarkWebhookWorksAsAFeishuOne(t *testing.T) {
	for _, hook := range []string{
		"https://open.feishu.cn/open-apis/bot/v2/hook/" + token,
		"https://open.larksuite.com/open-apis/bot/v2/hook/" + token,
	} {
		cfg := sinktest.Decode(t, feishu.Type, "url_env: U\nsecret_env: S\n", map[string]string{"U": hook, "S": secret})
		host := strings.Split(hook, "/open-apis")[0]
		if got := cfg.Target(); got != host+"/open-apis/bot/v2/hook/…" {
			t.Errorf("target %q", got)
		}
		if got, want := strings.Join(cfg.Summary(), ", "), "url_env: U, secret_env: S (signed), paced 5 per 1.1s and 100 per 1m1s"; got != want {
			t.Errorf("summary %q, want %q", got, want)
		}
		ev := sinktest.Event("a1", 0, event.Start)
		reqs, err := cfg.Render(&ev)
		if err != nil || len(reqs) != 1 || reqs[0].What != "POST "+host+"/open-apis/bot/v2/hook/…" {
			t.Fatalf("render: %v %v", reqs, err)
		}
	}
}

func TestTheBodyIsFeishusInteractiveCard(t *testing.T) {
	ev := sinktest.Event("a1", 2, event.End)
	b, err := feishu.Body(&ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Timestamp *string `json:"timestamp"`
		MsgType   string  `json:"msg_type"`
		Card      struct {
			Header struct {
				Template string
				Title    struct{ Tag, Content string }
			}
			Elements []struct {
				Tag  string
				Text struct{ Tag, Content string }
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Timestamp != nil || got.MsgType != "interactive" || got.Card.Header.Template != "green" || got.Card.Header.Title.Tag != "plain_text" ||
		len(got.Card.Elements) != 1 || got.Card.Elements[0].Text.Tag != "lark_md" || !strings.Contains(got.Card.Elements[0].Text.Content, "**Resolved:** at 2026-11-21 08:00:00 UTC, after 17m") {
		t.Fatalf("body %s", b)
	}
}

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one signed card under the 20 KB cap listing as many as
// fit in its panel; listing the digest as alarm management does (25 at a
// time) posts the others in later cards, so that each alarm is in exactly
// one panel.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	kit.Folds(t, feishu.MaxBody, func(m notifytest.FeishuMessage) int { return m.Size }, notifytest.FeishuMessage.Panels)
}
