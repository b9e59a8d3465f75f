package wecom_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

const key = "693a91f6-7c3e-4bc4-97a0-0ec2f1a5aa5e"

// kit makes sinks and fake robots of key.
var kit = robottest.Kit[notifytest.WeComMessage]{
	Type: wecom.Type,
	Start: func(t *testing.T, clk *clock.Fake) robottest.Robot[notifytest.WeComMessage] {
		return notifytest.NewWeCom(t, key, clk.Now)
	},
	// 20 messages a minute per robot, as WeCom documents it.
	Pace: notify.Window{N: 20, Per: time.Minute},
}

func TestABurstToOneRobotKeeps20AMinuteAndLosesNothing(t *testing.T) {
	const n = 100
	msgs := kit.Burst(t, n, "burst%03d", "")
	if took := msgs[n-1].At.Sub(msgs[0].At); took != 4*wecom.Window {
		t.Errorf("the burst took %s on the robot's clock, want %s", took, 4*wecom.Window)
	}
}

func TestTwoSinksOnOneRobotShareItsPace(t *testing.T) {
	kit.Burst(t, 50, "pair%02d", "", "mention_user_ids: [zhangsan]\n")
}

func TestTooFrequentIsRetriedAfterAWindowThatEverySinkOfTheRobotWaits(t *testing.T) {
	kit.Limited(t, robottest.Limit{Fill: 20, RetryAfter: wecom.Window, Said: []string{"45009", "api freq out of limit"}})
}

func TestAWrongKeyIsDeadLetteredNamingURLEnv(t *testing.T) {
	r := kit.Rig(t, "")
	s := kit.Build(t, "ops", r.Clock, notify.NewLimits(r.Clock), strings.Replace(r.Fake.URL(), key, "0000aaaa-1111-2222-3333-444455556666", 1), "")
	kit.DeadLetter(t, r.Clock, s, []string{"93000", "invalid webhook url", "url_env", "webhook URL"}, key)
}

// TestEveryErrcodeIsClassified: WeCom's answers, from its global error
// codes.
func TestEveryErrcodeIsClassified(t *testing.T) {
	kit.Classify(t, "/cgi-bin/webhook/send?key="+key, []robottest.Answer{
		{Body: `{"errcode":0,"errmsg":"ok"}`},
		{Body: `{"errcode":45009,"errmsg":"api freq out of limit"}`, Retry: true, RetryAfter: wecom.Window, WantInErr: "45009"},
		{Body: `{"errcode":-1,"errmsg":"system busy"}`, Retry: true, WantInErr: "busy"},
		{Body: `{"errcode":93000,"errmsg":"invalid webhook url, hint: [1708397705432012366598976], from ip: 203.0.113.9"}`, WantInErr: "url_env"},
		{Body: `{"errcode":40058,"errmsg":"markdown.content exceed max length 4096. invalid Request Parameter"}`, WantInErr: "markdown.content exceed"},
		{Body: `{"errcode":44004,"errmsg":"empty content"}`, WantInErr: "templates"},
		{Body: `{"errcode":93004,"errmsg":"robot disabled"}`, WantInErr: "93004 (robot disabled)"},
		{Body: `<html>gateway</html>`, WantInErr: "not WeCom's"},
		{Body: `{"ok":true}`, WantInErr: "no errcode"},
	})
}

func TestAHugeAlarmIsCutTo4096BytesAtARuneAndKeepsItsMentions(t *testing.T) {
	r := kit.Rig(t, "mention_user_ids: [zhangsan, lisi]\n")
	ev := sinktest.Event("huge", 0, event.Start)
	ev.Data.StationName = strings.Repeat("储能电站", 1000) // 12 KB
	content := r.Only(ev).Content
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
	kit.TemplateFails(t, robottest.Fallback{
		Extra: "title: \"{{.LevelName}} alarm {{.OriginID}}\"\ntext: \"{{if eq .OriginID \\\"boom\\\"}}{{index .Event.Data.Alarm 9999}}{{end}}>{{.EventCode}} on {{.Event.Data.DeviceName}}\"\n",
		Fine:  "### severe alarm fine\n>E1023 on Inverter #3",
		Default: func(text string) bool {
			return strings.HasPrefix(text, "### severe alarm boom\n>Level: <font color=\"warning\">severe</font>")
		},
	})
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=" + key
	robottest.Refused(t, wecom.Type, []robottest.Refusal{
		{Name: "no url_env", YAML: "mention_user_ids: [a]\n", Env: nil, Want: "missing: a wecom sink needs url_env"},
		{Name: "url_env unset", YAML: "url_env: U\n", Env: nil, Want: "U"},
		{Name: "no key", YAML: "url_env: U\n", Env: map[string]string{"U": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send"}, Want: "no key"},
		{Name: "mention everyone", YAML: "url_env: U\nmention_user_ids: [\"@all\"]\n", Env: map[string]string{"U": hook}, Want: "cannot mention everyone"},
		{Name: "bad user id", YAML: "url_env: U\nmention_user_ids: [\"zhang san\"]\n", Env: map[string]string{"U": hook}, Want: "not a WeCom user id"},
		{Name: "mobile mentions", YAML: "url_env: U\nmentioned_mobile_list: [\"13800001111\"]\n", Env: map[string]string{"U": hook}, Want: `unknown key "mentioned_mobile_list"`},
	}, key)
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

// TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice: 25
// alarms whose names are 255 bytes are one list message within WeCom's 4096
// bytes of markdown, each device still named by its start; the mentions go
// with the digest's first message only.
func TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice(t *testing.T) {
	r := kit.Rig(t, "mention_user_ids: [zhangsan]\n")
	dg := sinktest.DigestOf("long", 25, 3)
	sinktest.LongNames(dg, strings.Repeat("北", 85))
	r.Digest(dg, dg.Items)
	got := r.Fake.Accepted()
	if len(got) != 2 {
		t.Fatalf("%d messages, want the digest and one list", len(got))
	}
	first, list := got[0].Content, got[1].Content
	if !strings.HasSuffix(first, "<@zhangsan>") || strings.Contains(list, "<@zhangsan>") {
		t.Errorf("the mentions are not on the digest's first message alone:\n%s\n---\n%s", first, list)
	}
	if len(list) > wecom.MaxContent {
		t.Errorf("the list is %d bytes", len(list))
	}
	sinktest.AssertDevices(t, dg, list)
}
