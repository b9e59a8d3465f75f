package wecom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// build decodes the options (url_env WECOM_URL = hook, plus extra lines) and
// builds a sink named name on clk, pacing with limits (shared by the sinks
// of one relay).
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, hook, extra string, failed func(string, *event.Event, error)) notify.Sink {
	t.Helper()
	return sinktest.Build(t, wecom.Type, name, "url_env: WECOM_URL\n"+extra, map[string]string{"WECOM_URL": hook}, sinktype.Deps{Clock: clk, Limits: limits, TemplateFailed: failed})
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, nil)
}

// assertPaced fails unless the robot took every one of msgs and no 21 of
// them arrived within 60 s of one another, on the fake clock.
func assertPaced(t *testing.T, msgs []notifytest.WeComMessage) {
	t.Helper()
	for i, m := range msgs {
		if m.ErrCode != notifytest.WeComOK {
			t.Fatalf("request %d was refused: errcode %d %s", i, m.ErrCode, m.ErrMsg)
		}
		if i+20 < len(msgs) {
			if gap := msgs[i+20].At.Sub(m.At); gap < time.Minute {
				t.Fatalf("requests %d and %d arrived %s apart: 21 requests within a minute", i, i+20, gap)
			}
		}
	}
}

func TestABurstToOneRobotKeeps20AMinuteAndLosesNothing(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	s := build(t, "ops", clk, notify.NewLimits(clk), robot.URL(), "", nil)
	const n = 100
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
	if took := msgs[n-1].At.Sub(msgs[0].At); took != 4*wecom.Window {
		t.Errorf("the burst took %s on the robot's clock, want %s", took, 4*wecom.Window)
	}
}

func TestTwoSinksOnOneRobotShareItsPace(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	limits := notify.NewLimits(clk)
	a := build(t, "ops", clk, limits, robot.URL(), "", nil)
	b := build(t, "ops-mention", clk, limits, robot.URL(), "mention_user_ids: [zhangsan]\n", nil)
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("pair%02d", i), 1, event.Start)); err != nil {
			t.Fatalf("alarm %d through %s: %v", i, s.Name(), err)
		}
	}
	msgs := robot.Messages()
	if len(msgs) != 50 {
		t.Fatalf("the robot got %d requests, want 50", len(msgs))
	}
	assertPaced(t, msgs)
}

func TestTooFrequentIsRetriedAfterAWindowThatEverySinkOfTheRobotWaits(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	// Another relay (limits of its own) uses up the robot's minute.
	other := build(t, "elsewhere", clk, notify.NewLimits(clk), robot.URL(), "", nil)
	for i := range 20 {
		if _, err := send(t, clk, other, sinktest.Event(fmt.Sprintf("other%02d", i), 2, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := build(t, "ops", clk, limits, robot.URL(), "", nil)
	sibling := build(t, "ops-copy", clk, limits, robot.URL(), "", nil)
	res, err := send(t, clk, s, sinktest.Event("limited", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != wecom.Window {
		t.Fatalf("21st message in a minute: retry %v after %s (%v), want a retry after %s", res.Retry, res.RetryAfter, err, wecom.Window)
	}
	if !strings.Contains(err.Error(), "45009") || !strings.Contains(err.Error(), "api freq out of limit") {
		t.Errorf("the error does not name the errcode and its message: %v", err)
	}
	limitedAt := clk.Now()
	if _, err := send(t, clk, sibling, sinktest.Event("after", 0, event.Start)); err != nil {
		t.Fatalf("the next message: %v", err)
	}
	msgs := robot.Messages()
	last := msgs[len(msgs)-1]
	if len(msgs) != 22 || last.ErrCode != notifytest.WeComOK || last.At.Sub(limitedAt) != wecom.Window {
		t.Fatalf("after the refusal: %d requests, the last errcode %d %s after it, want 22, the last taken %s after",
			len(msgs), last.ErrCode, last.At.Sub(limitedAt), wecom.Window)
	}
}

func TestAWrongKeyIsDeadLetteredNamingURLEnv(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	s := build(t, "ops", clk, notify.NewLimits(clk), strings.Replace(robot.URL(), key, "0000aaaa-1111-2222-3333-444455556666", 1), "", nil)
	res, err := send(t, clk, s, sinktest.Event("nokey", 0, event.Start))
	if err == nil || res.Retry {
		t.Fatalf("retry %v (%v), want a dead letter", res.Retry, err)
	}
	for _, w := range []string{`wecom sink "ops": post of nokey:start: `, "93000", "invalid webhook url", "url_env", "webhook URL"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
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
		{`{"errcode":45009,"errmsg":"api freq out of limit"}`, true, wecom.Window, "45009"},
		{`{"errcode":-1,"errmsg":"system busy"}`, true, 0, "busy"},
		{`{"errcode":93000,"errmsg":"invalid webhook url, hint: [1708397705432012366598976], from ip: 203.0.113.9"}`, false, 0, "url_env"},
		{`{"errcode":40058,"errmsg":"markdown.content exceed max length 4096. invalid Request Parameter"}`, false, 0, "markdown.content exceed"},
		{`{"errcode":44004,"errmsg":"empty content"}`, false, 0, "templates"},
		{`{"errcode":93004,"errmsg":"robot disabled"}`, false, 0, "93004 (robot disabled)"},
		{`<html>gateway</html>`, false, 0, "not WeCom's"},
		{`{"ok":true}`, false, 0, "no errcode"},
	}
	for _, c := range cases {
		t.Run(c.answer, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(c.answer))
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(sinktest.Epoch)
			s := build(t, "ops", clk, notify.NewLimits(clk), srv.URL+"/cgi-bin/webhook/send?key="+key, "", nil)
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

func TestAHugeAlarmIsCutTo4096BytesAtARuneAndKeepsItsMentions(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	s := build(t, "ops", clk, notify.NewLimits(clk), robot.URL(), "mention_user_ids: [zhangsan, lisi]\n", nil)
	ev := sinktest.Event("huge", 0, event.Start)
	ev.Data.StationName = strings.Repeat("储能电站", 1000) // 12 KB
	if _, err := send(t, clk, s, ev); err != nil {
		t.Fatal(err)
	}
	got := robot.Accepted()
	if len(got) != 1 {
		t.Fatalf("the robot took %d messages, want 1", len(got))
	}
	content := got[0].Content
	if len(content) > wecom.MaxContent || !utf8.ValidString(content) {
		t.Errorf("content of %d bytes (valid UTF-8: %v), want at most %d", len(content), utf8.ValidString(content), wecom.MaxContent)
	}
	// Each upstream value is cut to sinktype.MaxValue, so the facts after
	// the station survive.
	if !strings.Contains(content, ">Alarm: huge") || !strings.HasSuffix(content, "\n<@zhangsan><@lisi>") {
		t.Errorf("the content lost the alarm's id or the mentions: ...%s", content[max(len(content)-80, 0):])
	}
}

func TestAnUpstreamNameCannotMentionOrRecolour(t *testing.T) {
	ev := sinktest.Event("inject", 3, event.Start)
	ev.Data.DeviceName = "PCS <@all> <font color=\"warning\">\n# fire"
	b, err := wecom.Body(&ev, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "<@all>") || strings.Contains(string(b), `<font color=\"warning\">`) || strings.Contains(string(b), `\n# fire`) {
		t.Fatalf("the device name reached the markup: %s", b)
	}
	if !strings.Contains(string(b), "PCS ‹@all› ‹font color=\\\"warning\\\"› # fire") {
		t.Errorf("the device name is not shown as text: %s", b)
	}
}

func TestAFailingTemplateSendsTheDefaultAndSaysSo(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	var mu sync.Mutex
	var failed []string
	s := build(t, "ops", clk, notify.NewLimits(clk), robot.URL(),
		"title: \"{{.LevelName}} alarm {{.OriginID}}\"\ntext: \"{{if eq .OriginID \\\"boom\\\"}}{{index .Event.Data.Alarm 9999}}{{end}}>{{.EventCode}} on {{.Event.Data.DeviceName}}\"\n",
		func(sink string, ev *event.Event, err error) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, sink+" "+ev.ID+": "+err.Error())
		})
	for _, origin := range []string{"fine", "boom"} {
		if _, err := send(t, clk, s, sinktest.Event(origin, 1, event.Start)); err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
	}
	got := robot.Accepted()
	if len(got) != 2 {
		t.Fatalf("the robot took %d messages, want 2", len(got))
	}
	if want := "### severe alarm fine\n>E1023 on Inverter #3"; got[0].Content != want {
		t.Errorf("templated message:\n%s\nwant:\n%s", got[0].Content, want)
	}
	if !strings.HasPrefix(got[1].Content, "### severe alarm boom\n>Level: <font color=\"warning\">severe</font>") {
		t.Errorf("the failing text template did not fall back to the default text:\n%s", got[1].Content)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "ops boom:start: text template") {
		t.Errorf("TemplateFailed was told %q, want the text template's failure on boom:start", failed)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=" + key
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no url_env", "mention_user_ids: [a]\n", nil, "missing: a wecom sink needs url_env"},
		{"url_env unset", "url_env: U\n", nil, "U"},
		{"no key", "url_env: U\n", map[string]string{"U": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send"}, "no key"},
		{"mention everyone", "url_env: U\nmention_user_ids: [\"@all\"]\n", map[string]string{"U": hook}, "cannot mention everyone"},
		{"bad user id", "url_env: U\nmention_user_ids: [\"zhang san\"]\n", map[string]string{"U": hook}, "not a WeCom user id"},
		{"mobile mentions", "url_env: U\nmentioned_mobile_list: [\"13800001111\"]\n", map[string]string{"U": hook}, `unknown key "mentioned_mobile_list"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(wecom.Type, c.yaml, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("the problem shows the key: %v", err)
			}
		})
	}
}

func TestSummaryAndTargetHoldNoKey(t *testing.T) {
	cfg := sinktest.Decode(t, wecom.Type, "url_env: U\nmention_user_ids: [zhangsan]\n",
		map[string]string{"U": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=" + key})
	if got, want := strings.Join(cfg.Summary(), ", "), "url_env: U, mentions 1 user id(s), paced 20 per 1m1s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got := cfg.Target(); got != "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?…" {
		t.Errorf("target %q", got)
	}
}

// TestUpstreamTextCannotPostALinkOrEmphasis: a device name written as a
// Markdown link, code or emphasis reaches the group as plain text.
func TestUpstreamTextCannotPostALinkOrEmphasis(t *testing.T) {
	got := wecom.Escape("[Acknowledge](https://evil.example/login) `x` *y* _z_")
	for _, c := range []string{"[", "]", "(", ")", "`", "*", "_"} {
		if strings.Contains(got, c) {
			t.Errorf("Escape left %q in %q", c, got)
		}
	}
}
