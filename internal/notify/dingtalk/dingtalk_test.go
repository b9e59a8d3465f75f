package dingtalk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// robotOptions are the options of a sink posting to hook (a webhook URL
// with its access token), signed with secret unless it is empty, plus
// extra lines.
func robotOptions(hook, secret, extra string) (string, map[string]string) {
	env := map[string]string{"DINGTALK_URL": hook}
	text := "url_env: DINGTALK_URL\n"
	if secret != "" {
		env["DINGTALK_SECRET"] = secret
		text += "secret_env: DINGTALK_SECRET\n"
	}
	return text + extra, env
}

// build decodes the options and builds a sink named name on clk, pacing with
// limits (shared by the sinks of one relay).
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, text string, env map[string]string) notify.Sink {
	t.Helper()
	return sinktest.Build(t, dingtalk.Type, name, text, env, sinktype.Deps{Clock: clk, Limits: limits})
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, nil)
}

// assertPaced fails unless the robot took every one of msgs and no 21
// of them arrived within 60 s of one another, on the fake clock.
func assertPaced(t *testing.T, msgs []notifytest.DingTalkMessage) {
	t.Helper()
	for i, m := range msgs {
		if m.ErrCode != notifytest.DingTalkOK {
			t.Fatalf("request %d was refused: errcode %d %s", i, m.ErrCode, m.ErrMsg)
		}
		if i+20 < len(msgs) {
			if gap := msgs[i+20].At.Sub(m.At); gap < time.Minute {
				t.Fatalf("requests %d and %d arrived %s apart: 21 requests within a minute", i, i+20, gap)
			}
		}
	}
}

func TestA200AlarmBurstToOneRobotKeeps20AMinuteAndLosesNothing(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	text, env := robotOptions(robot.URL(), secret, "")
	s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
	const n = 200
	for i := range n {
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("burst%03d", i), i%4, event.Start)); err != nil {
			t.Fatalf("alarm %d: %v", i, err)
		}
	}
	msgs := robot.Messages()
	if len(msgs) != n {
		t.Fatalf("the robot got %d requests, want %d", len(msgs), n)
	}
	assertPaced(t, msgs)
	for i, m := range msgs {
		if want := fmt.Sprintf("burst%03d", i); !strings.Contains(m.Text(), want) {
			t.Fatalf("request %d is not about %s:\n%s", i, want, m.Text())
		}
	}
	// 10 windows of 20: the last message leaves 9 windows of 61 s after the
	// first, not later.
	if took := msgs[n-1].At.Sub(msgs[0].At); took != 9*dingtalk.Window {
		t.Errorf("the burst took %s on the robot's clock, want %s", took, 9*dingtalk.Window)
	}
}

func TestTwoSinksOnOneRobotShareItsPace(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	limits := notify.NewLimits(clk)
	text, env := robotOptions(robot.URL(), secret, "")
	a := build(t, "ops", clk, limits, text, env)
	b := build(t, "ops-copy", clk, limits, text+"title: \"{{.LevelName}} {{.OriginID}}\"\n", env)
	for i := range 60 {
		s := a
		if i%2 == 1 {
			s = b
		}
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("pair%02d", i), 1, event.Start)); err != nil {
			t.Fatalf("alarm %d through %s: %v", i, s.Name(), err)
		}
	}
	msgs := robot.Messages()
	if len(msgs) != 60 {
		t.Fatalf("the robot got %d requests, want 60", len(msgs))
	}
	assertPaced(t, msgs)
}

func TestTheRobotsBlockIsWaitedOutByEverySinkOfTheRobot(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	text, env := robotOptions(robot.URL(), secret, "")
	// Another relay (limits of its own) uses up the robot's minute.
	other := build(t, "elsewhere", clk, notify.NewLimits(clk), text, env)
	for i := range 20 {
		if _, err := send(t, clk, other, sinktest.Event(fmt.Sprintf("other%02d", i), 2, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := build(t, "ops", clk, limits, text, env)
	sibling := build(t, "ops-copy", clk, limits, text, env)
	res, err := send(t, clk, s, sinktest.Event("blocked", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != dingtalk.Block {
		t.Fatalf("21st message in a minute: retry %v after %s (%v), want a retry after %s", res.Retry, res.RetryAfter, err, dingtalk.Block)
	}
	if !strings.Contains(err.Error(), "130101") || !strings.Contains(err.Error(), "10m0s") {
		t.Errorf("the error does not name the errcode and the block: %v", err)
	}
	blockedAt := clk.Now()
	if _, err := send(t, clk, sibling, sinktest.Event("after", 0, event.Start)); err != nil {
		t.Fatalf("the next message: %v", err)
	}
	msgs := robot.Messages()
	last := msgs[len(msgs)-1]
	if len(msgs) != 22 || last.ErrCode != notifytest.DingTalkOK || last.At.Sub(blockedAt) != dingtalk.Block {
		t.Fatalf("after the block: %d requests, the last errcode %d %s after it, want 22 requests, the last taken %s after",
			len(msgs), last.ErrCode, last.At.Sub(blockedAt), dingtalk.Block)
	}
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
			text, env := robotOptions(hook, c.secret, c.extra)
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
			if !strings.HasPrefix(err.Error(), `dingtalk sink "ops": post of refused:start: `) {
				t.Errorf("the error does not start with the sink and the event: %v", err)
			}
		})
	}
}

func TestEveryErrcodeIsClassified(t *testing.T) {
	cases := []struct {
		answer     string
		retry      bool
		retryAfter time.Duration
		wantInErr  string
	}{
		{`{"errcode":0,"errmsg":"ok"}`, false, 0, ""},
		{`{"errcode":130101,"errmsg":"send too fast, exceed 20 times per minute"}`, true, dingtalk.Block, "130101"},
		{`{"errcode":410100,"errmsg":"发送速度太快而限流"}`, true, dingtalk.Block, "410100"},
		{`{"errcode":-1,"errmsg":"系统繁忙"}`, true, 0, "busy"},
		{`{"errcode":300005,"errmsg":"token is not exist"}`, false, 0, "url_env"},
		{`{"errcode":310000,"errmsg":"ip 203.0.113.9 not in whitelist"}`, false, 0, "IP allowlist"},
		{`{"errcode":460101,"errmsg":"message too long, exceed 20000 bytes"}`, false, 0, "20000"},
		{`{"errcode":400102,"errmsg":"机器人已停用"}`, false, 0, "400102 (机器人已停用)"},
		{`<html>gateway</html>`, false, 0, "not DingTalk's"},
		{`{"ok":true}`, false, 0, "no errcode"},
	}
	for _, c := range cases {
		t.Run(c.answer, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(c.answer))
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(sinktest.Epoch)
			text, env := robotOptions(srv.URL+"/robot/send?access_token="+token, secret, "")
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

func TestAHugeAlarmIsCutToTheRobotsSizeAndKeepsItsMentions(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	text, env := robotOptions(robot.URL(), secret, "at_mobiles: [\"13800001111\"]\nat_user_ids: [manager01]\n")
	s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
	ev := sinktest.Event("huge", 0, event.Start)
	ev.Data.EventDesc = strings.Repeat("逆变器过温 ", 6000) // 96 KB
	if _, err := send(t, clk, s, ev); err != nil {
		t.Fatal(err)
	}
	got := robot.Accepted()
	if len(got) != 1 {
		t.Fatalf("the robot took %d messages, want 1", len(got))
	}
	md := got[0].Body["markdown"].(map[string]any)
	body, title := md["text"].(string), md["title"].(string)
	if len(body) > dingtalk.MaxText || len(title) > dingtalk.MaxTitle {
		t.Errorf("text of %d bytes and title of %d, want at most %d and %d", len(body), len(title), dingtalk.MaxText, dingtalk.MaxTitle)
	}
	// Each upstream value is cut to sinktype.MaxValue, so the facts after
	// the description survive.
	if !strings.Contains(body, "**Alarm:** huge") || !strings.HasSuffix(body, "\n\n@13800001111 @manager01") {
		t.Errorf("the text lost the alarm's id or the mentions: ...%s", body[max(len(body)-120, 0):])
	}
	at := got[0].Body["at"].(map[string]any)
	if fmt.Sprint(at["atMobiles"], at["atUserIds"], at["isAtAll"]) != "[13800001111] [manager01] false" {
		t.Errorf("at = %v", at)
	}
}

func TestAFailingTemplateSendsTheDefaultAndSaysSo(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	text, env := robotOptions(robot.URL(), secret,
		"title: \"{{.LevelName}} alarm {{.OriginID}}\"\ntext: \"{{if eq .OriginID \\\"boom\\\"}}{{index .Event.Data.Alarm 9999}}{{end}}**{{.EventCode}}** on {{.Event.Data.DeviceName}}\"\n")
	cfg := sinktest.Decode(t, dingtalk.Type, text, env)
	var mu sync.Mutex
	var failed []string
	deps := sinktype.Deps{Clock: clk, Limits: notify.NewLimits(clk), TemplateFailed: func(sink string, ev *event.Event, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, sink+" "+ev.ID+": "+err.Error())
	}}
	s, err := cfg.Build(context.Background(), "ops", deps)
	if err != nil {
		t.Fatal(err)
	}
	for _, origin := range []string{"fine", "boom"} {
		if _, err := send(t, clk, s, sinktest.Event(origin, 1, event.Start)); err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
	}
	got := robot.Accepted()
	if len(got) != 2 {
		t.Fatalf("the robot took %d messages, want 2", len(got))
	}
	if want := "severe alarm fine\n**E1023** on Inverter #3"; got[0].Text() != want {
		t.Errorf("templated message:\n%s\nwant:\n%s", got[0].Text(), want)
	}
	if !strings.Contains(got[1].Text(), "severe alarm boom\n### 🟠 SEVERE alarm: E1023") {
		t.Errorf("the failing text template did not fall back to the default text:\n%s", got[1].Text())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "ops boom:start: text template") {
		t.Errorf("TemplateFailed was told %q, want the text template's failure on boom:start", failed)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://oapi.dingtalk.com/robot/send?access_token=" + token
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no url_env", "secret_env: S\n", map[string]string{"S": secret}, "missing: a dingtalk sink needs url_env"},
		{"url_env unset", "url_env: U\n", nil, "U"},
		{"no access token", "url_env: U\n", map[string]string{"U": "https://oapi.dingtalk.com/robot/send"}, "no access_token"},
		{"signed URL", "url_env: U\n", map[string]string{"U": hook + "&timestamp=1&sign=x"}, "secret in secret_env"},
		{"secret that is not one", "url_env: U\nsecret_env: S\n", map[string]string{"U": hook, "S": hook}, "start with SEC"},
		{"bad mobile", "url_env: U\nat_mobiles: [\"138 0000\"]\n", map[string]string{"U": hook}, "not a mobile number"},
		{"unknown key", "url_env: U\nchannel: ops\n", map[string]string{"U": hook}, `unknown key "channel"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(dingtalk.Type, c.yaml, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), secret) {
				t.Fatalf("the problem shows a secret: %v", err)
			}
		})
	}
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
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	text, env := robotOptions(robot.URL(), secret, "at_mobiles: [\"13800001111\"]\ntext: '{{range 60}}{{$.Event.Data.EventDesc}}{{end}}'\n")
	s := build(t, "ops", clk, notify.NewLimits(clk), text, env)
	ev := sinktest.Event("big1", 0, event.Start)
	ev.Data.EventDesc = strings.Repeat(`"\`, 300)
	if _, err := send(t, clk, s, ev); err != nil {
		t.Fatal(err)
	}
	got := robot.Accepted()
	if len(got) != 1 {
		t.Fatalf("the robot took %d messages, want 1", len(got))
	}
	if n := got[0].Size; n > dingtalk.MaxBody {
		t.Fatalf("body of %d bytes, over %d", n, dingtalk.MaxBody)
	}
	if md := got[0].Body["markdown"].(map[string]any); !strings.HasSuffix(md["text"].(string), "@13800001111") {
		t.Fatal("the mention was cut")
	}
}
