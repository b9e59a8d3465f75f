package feishu_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// botOptions are the options of a sink posting to hook, signed with secret
// unless it is empty, plus extra lines.
func botOptions(hook, secret, extra string) (string, map[string]string) {
	env := map[string]string{"FEISHU_URL": hook}
	text := "url_env: FEISHU_URL\n"
	if secret != "" {
		env["FEISHU_SECRET"] = secret
		text += "secret_env: FEISHU_SECRET\n"
	}
	return text + extra, env
}

// build decodes the options and builds a sink named name on clk, pacing with
// limits (shared by the sinks of one relay).
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, text string, env map[string]string) notify.Sink {
	t.Helper()
	return sinktest.Build(t, feishu.Type, name, text, env, sinktype.Deps{Clock: clk, Limits: limits})
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, nil)
}

func TestABurstOf30ToOneBotKeeps5ASecondAndIsNeverRefused(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, secret, clk.Now)
	limits := notify.NewLimits(clk)
	text, env := botOptions(bot.URL(), secret, "")
	// Two sinks of one bot, as two routes to one group would have.
	a := build(t, "ops", clk, limits, text, env)
	b := build(t, "ops-urgent", clk, limits, text, env)
	const n = 30
	for i := range n {
		s := a
		if i%3 == 0 {
			s = b
		}
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("burst%02d", i), i%4, event.Start)); err != nil {
			t.Fatalf("alarm %d through %s: %v", i, s.Name(), err)
		}
	}
	msgs := bot.Messages()
	if len(msgs) != n {
		t.Fatalf("the bot got %d requests, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if m.Code != notifytest.FeishuOK {
			t.Fatalf("request %d was refused: code %d %s", i, m.Code, m.Msg)
		}
		if i+5 < n {
			if gap := msgs[i+5].At.Sub(m.At); gap < time.Second {
				t.Fatalf("requests %d and %d arrived %s apart: 6 requests within a second", i, i+5, gap)
			}
		}
		if want := fmt.Sprintf("burst%02d", i); !strings.Contains(m.Text(), want) {
			t.Fatalf("request %d is not about %s:\n%s", i, want, m.Text())
		}
	}
}

func TestTheBotsFrequencyLimitIsWaitedOutByEverySinkOfTheBot(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, secret, clk.Now)
	text, env := botOptions(bot.URL(), secret, "")
	// Another relay (limits of its own) uses up the bot's second.
	other := build(t, "elsewhere", clk, notify.NewLimits(clk), text, env)
	for i := range 5 {
		if _, err := send(t, clk, other, sinktest.Event(fmt.Sprintf("other%d", i), 2, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := build(t, "ops", clk, limits, text, env)
	sibling := build(t, "ops-copy", clk, limits, text, env)
	res, err := send(t, clk, s, sinktest.Event("limited", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != feishu.Block {
		t.Fatalf("6th message in a second: retry %v after %s (%v), want a retry after %s", res.Retry, res.RetryAfter, err, feishu.Block)
	}
	if !strings.Contains(err.Error(), "11232") || !strings.HasPrefix(err.Error(), `feishu sink "ops": post of limited:start: `) {
		t.Errorf("the error does not name the sink, the event and the code: %v", err)
	}
	limitedAt := clk.Now()
	if _, err := send(t, clk, sibling, sinktest.Event("after", 0, event.Start)); err != nil {
		t.Fatalf("the next message: %v", err)
	}
	msgs := bot.Messages()
	last := msgs[len(msgs)-1]
	if len(msgs) != 7 || last.Code != notifytest.FeishuOK || last.At.Sub(limitedAt) != feishu.Block {
		t.Fatalf("after the limit: %d requests, the last code %d %s after it, want 7 requests, the last taken %s after",
			len(msgs), last.Code, last.At.Sub(limitedAt), feishu.Block)
	}
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
			clk := clock.NewFake(sinktest.Epoch)
			bot := notifytest.NewFeishu(t, token, secret, clk.Now)
			text, env := botOptions(bot.URL(), secret, c.extra)
			s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
			ev := sinktest.Event("huge", 0, event.Start)
			c.grow(&ev)
			if _, err := send(t, clk, s, ev); err != nil {
				t.Fatal(err)
			}
			got := bot.Accepted()
			if len(got) != 1 {
				t.Fatalf("the bot took %d messages, want 1", len(got))
			}
			if got[0].Size > feishu.MaxBody {
				t.Errorf("body of %d bytes, want at most %d", got[0].Size, feishu.MaxBody)
			}
			if c.extra != "" && got[0].Size < feishu.MaxBody-1024 {
				t.Errorf("body of %d bytes: the text was cut further than %d bytes need", got[0].Size, feishu.MaxBody)
			}
			if c.extra == "" && !strings.Contains(got[0].Text(), "**Alarm:** huge") {
				t.Errorf("the cut card lost the alarm's facts:\n%s", got[0].Text()[len(got[0].Text())-300:])
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
			text, env := botOptions(hook, c.secret, "")
			s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
			res, err := send(t, clk, s, sinktest.Event("refused", 0, event.Start))
			if err == nil || res.Retry {
				t.Fatalf("retry %v (%v), want a dead letter", res.Retry, err)
			}
			for _, w := range c.wantInErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			notifytest.AssertNoSecret(t, []string{token, secret}, map[string]string{"error": err.Error()})
		})
	}
}

func TestEveryAnswerIsClassified(t *testing.T) {
	cases := []struct {
		answer     string
		retry      bool
		retryAfter time.Duration
		wantInErr  string
	}{
		{`{"code":0,"msg":"success","data":{}}`, false, 0, ""},
		{`{"StatusCode":0,"StatusMessage":"success","code":0,"msg":"success"}`, false, 0, ""},
		{`{"Extra":null,"StatusCode":0,"StatusMessage":"success"}`, false, 0, ""},
		{`{"code":11232,"msg":"frequency limited"}`, true, feishu.Block, "11232"},
		{`{"code":1500,"msg":"internal error"}`, true, 0, "inside"},
		{`{"code":9499,"msg":"Bad Request"}`, false, 0, "templates"},
		{`{"StatusCode":9499,"StatusMessage":"fail to parse content"}`, false, 0, "9499 (fail to parse content)"},
		{`{"code":19002,"msg":"param invalid: msg_type"}`, false, 0, "19002"},
		{`{"code":19022,"msg":"Ip Not Allowed"}`, false, 0, "IP allowlist"},
		{`{"code":19024,"msg":"Key Words Not Found"}`, false, 0, "keywords"},
		{`{"code":230001,"msg":"unknown"}`, false, 0, "does not know"},
		{`<html>gateway</html>`, false, 0, "not Feishu's"},
		{`{"ok":true}`, false, 0, "no code"},
	}
	for _, c := range cases {
		t.Run(c.answer, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(c.answer))
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(sinktest.Epoch)
			text, env := botOptions(srv.URL+feishu.HookPath+token, secret, "")
			s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
			res, err := send(t, clk, s, sinktest.Event("code", 0, event.Start))
			if (err == nil) != (c.wantInErr == "") || res.Retry != c.retry || res.RetryAfter != c.retryAfter {
				t.Fatalf("retry %v after %s (%v), want retry %v after %s", res.Retry, res.RetryAfter, err, c.retry, c.retryAfter)
			}
			if err != nil && !strings.Contains(err.Error(), c.wantInErr) {
				t.Errorf("the error does not say %q: %v", c.wantInErr, err)
			}
		})
	}
}

func TestTheCardIsColouredByLevelAndOutcome(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, "", clk.Now)
	text, env := botOptions(bot.URL(), "", "")
	s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
	var evs []event.Event
	for level := range 4 {
		evs = append(evs, sinktest.Event(fmt.Sprintf("c%d", level), level, event.Start))
	}
	evs = append(evs, sinktest.Event("c0", 0, event.End), sinktest.Event("c1", 1, event.Invalid))
	for _, ev := range evs {
		if _, err := send(t, clk, s, ev); err != nil {
			t.Fatal(err)
		}
	}
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
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, secret, clk.Now)
	text, env := botOptions(bot.URL(), secret, "title: '{{.Event.Data.DeviceName}} {{.LevelName}}'\ntext: '**{{.EventCode}}** on {{.Event.Data.DeviceName}}'\n")
	s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
	ev := sinktest.Event("md", 1, event.Start)
	ev.Data.DeviceName = "**PCS** [x](http://evil.example) <at id=all></at>\nline ~~2~~ `c`"
	if _, err := send(t, clk, s, ev); err != nil {
		t.Fatal(err)
	}
	m := bot.Accepted()[0]
	want := "**PCS** [x](http://evil.example) <at id=all></at> line ~~2~~ `c` severe\n" +
		"**E1023** on &#42;&#42;PCS&#42;&#42; &#91;x&#93;(http://evil.example) &lt;at id=all&gt;&lt;/at&gt; line &#126;&#126;2&#126;&#126; &#96;c&#96;"
	if got := m.Text(); got != want {
		t.Errorf("card:\n%s\nwant:\n%s", got, want)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://open.feishu.cn/open-apis/bot/v2/hook/" + token
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no url_env", "secret_env: S\n", map[string]string{"S": secret}, "missing: a feishu sink needs url_env"},
		{"url_env unset", "url_env: U\n", nil, "U"},
		{"not a bot's webhook", "url_env: U\n", map[string]string{"U": "https://open.feishu.cn/open-apis/im/v1/messages"}, "/open-apis/bot/v2/hook/<token>"},
		{"no token", "url_env: U\n", map[string]string{"U": "https://open.feishu.cn/open-apis/bot/v2/hook/"}, "/open-apis/bot/v2/hook/<token>"},
		{"secret that is not one", "url_env: U\nsecret_env: S\n", map[string]string{"U": hook, "S": hook}, "signing secret"},
		{"bad template", "url_env: U\ntext: '{{.Nope'\n", map[string]string{"U": hook}, "bad template"},
		{"unknown key", "url_env: U\nchannel: ops\n", map[string]string{"U": hook}, `unknown key "channel"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(feishu.Type, c.yaml, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), secret) {
				t.Fatalf("the problem shows a secret: %v", err)
			}
		})
	}
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
