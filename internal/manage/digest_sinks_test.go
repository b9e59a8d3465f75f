package manage_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// chatFake is the fake of one chat vendor in a scenario, and the options of
// a sink "chat" posting to it.
type chatFake struct {
	// sink holds the sink's YAML lines after its name, env the variables
	// they read.
	sink string
	env  map[string]string
	// messages returns what the channel shows, one text per message in
	// order of arrival (edits change a message, they are none), and
	// whether it is top-level (not a reply in a thread).
	messages func() []chatMessage
	// digestText returns what the digest's first message says now (edited
	// where the channel can), or "" where it is never edited.
	digestText func() string
	// failOnce makes the vendor fail, once, the next message holding
	// marker, as a failure worth retrying.
	failOnce func(marker string)
	// failed counts the failures failOnce made.
	failed func() int
}

type chatMessage struct {
	text     string
	topLevel bool
}

// chatKit is one chat sink type in the digest scenario: how to start its
// fake, and how many messages a digest of 60 alarms is, all in its first
// message (a card's collapsible list, a mail) or in lists of 25 after it.
type chatKit struct {
	name  string
	start func(t *testing.T, clk *clock.Fake) chatFake
	// first is how many messages a digest of 60 alarms makes.
	first int
	// threaded says lists are replies to the digest's message.
	threaded bool
}

// flaky is a server in front of a vendor's fake that answers 500, once, to
// the first request whose body holds a marker; it passes on every other.
type flaky struct {
	srv    *httptest.Server
	proxy  *httputil.ReverseProxy
	mu     sync.Mutex
	marker string
	failed int
}

func newFlaky(t *testing.T, target string) *flaky {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// front returns target with the flaky server's scheme and host.
func (f *flaky) front(target string) string {
	u, _ := url.Parse(target)
	fu, _ := url.Parse(f.srv.URL)
	u.Scheme, u.Host = fu.Scheme, fu.Host
	return u.String()
}

func (f *flaky) failOnce(marker string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marker = marker
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *flaky) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	fail := f.marker != "" && strings.Contains(string(body), f.marker)
	if fail {
		f.marker = ""
		f.failed++
	}
	f.mu.Unlock()
	if fail {
		http.Error(w, "scripted failure", http.StatusInternalServerError)
		return
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	r.ContentLength = int64(len(body))
	f.proxy.ServeHTTP(w, r)
}

// every message accepted is top-level where the channel has no threads.
func flat(texts []string) []chatMessage {
	out := make([]chatMessage, len(texts))
	for i, s := range texts {
		out[i] = chatMessage{text: s, topLevel: true}
	}
	return out
}

var chatKits = []chatKit{
	{name: "telegram", first: 4, threaded: true, start: func(t *testing.T, clk *clock.Fake) chatFake {
		const token, chat = "7000001:AAHscenarioToken_abc-123456", -1001234567890
		api := notifytest.NewTelegram(t, token, clk.Now)
		api.AddChat(notifytest.TelegramChat{ID: chat, Title: "Plant alarms"})
		fl := newFlaky(t, api.URL())
		return chatFake{
			sink: "    type: telegram\n    token_env: TG_TOKEN\n    chat_id: -1001234567890\n    api_url: " + fl.srv.URL + "\n",
			env:  map[string]string{"TG_TOKEN": token},
			messages: func() []chatMessage {
				var out []chatMessage
				for _, c := range api.Calls() {
					if c.Method == notifytest.TelegramSendMessage && c.Status == http.StatusOK {
						out = append(out, chatMessage{text: c.Text, topLevel: c.ReplyTo == 0})
					}
				}
				return out
			},
			digestText: func() string {
				if ms := api.Messages(chat); len(ms) > 0 {
					return ms[0].Text
				}
				return ""
			},
			failOnce: fl.failOnce, failed: fl.count,
		}
	}},
	{name: "teams", first: 1, start: func(t *testing.T, clk *clock.Fake) chatFake {
		flow := notifytest.NewTeams(t, "Jq2dHk7_x9LmN0pQ-rS3tUvWxYz4AbCdEfGhIjKlMnO", clk.Now)
		fl := newFlaky(t, flow.URL())
		return chatFake{
			sink: "    type: teams\n    url_env: TEAMS_URL\n",
			env:  map[string]string{"TEAMS_URL": fl.front(flow.URL())},
			messages: func() []chatMessage {
				var texts []string
				for _, m := range flow.Accepted() {
					texts = append(texts, m.Text())
				}
				return flat(texts)
			},
			digestText: func() string { return "" },
			failOnce:   fl.failOnce, failed: fl.count,
		}
	}},
	{name: "feishu", first: 1, start: func(t *testing.T, clk *clock.Fake) chatFake {
		const token, secret = "5c1e7f2a-93d4-4b8e-a6f0-2d7c9b1e4a38", "qW3rT9yU1iO5pA7sD2fG4h"
		bot := notifytest.NewFeishu(t, token, secret, clk.Now)
		fl := newFlaky(t, bot.URL())
		return chatFake{
			sink: "    type: feishu\n    url_env: FEISHU_URL\n    secret_env: FEISHU_SECRET\n",
			env:  map[string]string{"FEISHU_URL": fl.srv.URL + feishu.HookPath + token, "FEISHU_SECRET": secret},
			messages: func() []chatMessage {
				var texts []string
				for _, m := range bot.Accepted() {
					texts = append(texts, m.Text())
				}
				return flat(texts)
			},
			digestText: func() string { return "" },
			failOnce:   fl.failOnce, failed: fl.count,
		}
	}},
	{name: "dingtalk", first: 4, start: func(t *testing.T, clk *clock.Fake) chatFake {
		const token, secret = "b3f1c0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1", "SEC8a1f5e0b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0"
		robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
		fl := newFlaky(t, robot.URL())
		return chatFake{
			sink: "    type: dingtalk\n    url_env: DINGTALK_URL\n    secret_env: DINGTALK_SECRET\n    at_mobiles: ['13800000000']\n",
			env:  map[string]string{"DINGTALK_URL": fl.front(robot.URL()), "DINGTALK_SECRET": secret},
			messages: func() []chatMessage {
				var texts []string
				for _, m := range robot.Accepted() {
					texts = append(texts, m.Text())
				}
				return flat(texts)
			},
			digestText: func() string { return "" },
			failOnce:   fl.failOnce, failed: fl.count,
		}
	}},
	{name: "wecom", first: 4, start: func(t *testing.T, clk *clock.Fake) chatFake {
		robot := notifytest.NewWeCom(t, "693a91f6-7c3e-4bc4-97a0-0ec2f1a5aa5e", clk.Now)
		fl := newFlaky(t, robot.URL())
		return chatFake{
			sink: "    type: wecom\n    url_env: WECOM_URL\n",
			env:  map[string]string{"WECOM_URL": fl.front(robot.URL())},
			messages: func() []chatMessage {
				var texts []string
				for _, m := range robot.Accepted() {
					texts = append(texts, m.Content)
				}
				return flat(texts)
			},
			digestText: func() string { return "" },
			failOnce:   fl.failOnce, failed: fl.count,
		}
	}},
	{name: "email", first: 1, threaded: true, start: func(t *testing.T, clk *clock.Fake) chatFake {
		const user, password = "relay-submit", "Sm7p-Passw0rd-42"
		files := notifytest.NewTLSFiles(t)
		srv := notifytest.NewSMTP(t, notifytest.SMTPConfig{Username: user, Password: password, TLS: files.Server, RequireTLS: true})
		var mu sync.Mutex
		failed := 0
		plain := func(m notifytest.SMTPMessage) string {
			body, err := m.Part("text/plain")
			if err != nil {
				t.Errorf("a mail without a text/plain part: %v", err)
			}
			return m.Header("Subject") + "\n" + body
		}
		return chatFake{
			sink: "    type: email\n    smtp: " + srv.Addr() + "\n    ca_file: " + files.CA + "\n" +
				"    username_env: SMTP_USER\n    password_env: SMTP_PASSWORD\n" +
				"    from: Relay Alarms <alarms@example.com>\n    to: [ops@example.com]\n",
			env: map[string]string{"SMTP_USER": user, "SMTP_PASSWORD": password},
			messages: func() []chatMessage {
				var out []chatMessage
				for _, m := range srv.Messages() {
					out = append(out, chatMessage{text: plain(m), topLevel: m.Header("In-Reply-To") == ""})
				}
				return out
			},
			digestText: func() string { return "" },
			failOnce: func(marker string) {
				srv.RefuseMessage(451, "4.7.1 Try again later", func(m notifytest.SMTPMessage) bool {
					if !strings.Contains(plain(m), marker) {
						return false
					}
					mu.Lock()
					defer mu.Unlock()
					failed++
					return true
				})
			},
			failed: func() int { mu.Lock(); defer mu.Unlock(); return failed },
		}
	}},
}

// Item 5, for each chat sink besides Slack: a flood of 60 starts is one
// digest, one top-level message plus what the channel needs for its list;
// 30 that join later are listed, and when listing them fails once, the
// retry posts nothing twice; after a restart, 10 ends reach the channel,
// listed and with the digest's counts, and no end is a message of its own.
func TestScenarioDigestOfEachChatSink(t *testing.T) {
	for _, kit := range chatKits {
		t.Run(kit.name, func(t *testing.T) { digestScenario(t, kit) })
	}
}

func digestScenario(t *testing.T, kit chatKit) {
	clk := clock.NewFake(t0)
	fake := kit.start(t, clk)
	s := newScenarioWith(t, clk, rulesHead+"  - name: chat\n"+fake.sink+`
routes:`+busRoute+`
  - name: people
    to: [chat]
`, fake.env)
	recs := make([]record, 90)
	for i := range recs {
		recs[i] = s.starts(fmt.Sprintf("f%03d", i), fmt.Sprintf("S%d", i%3), fmt.Sprintf("DEV%03d", i), "E_GRID", i%4)
	}
	top := func(ms []chatMessage) int {
		n := 0
		for _, m := range ms {
			if m.topLevel {
				n++
			}
		}
		return n
	}
	check := func(when string, total int) []chatMessage {
		t.Helper()
		ms := fake.messages()
		wantTop := total
		if kit.threaded {
			wantTop = 1
		}
		if len(ms) != total || top(ms) != wantTop {
			t.Fatalf("%s: %d messages, %d top-level; want %d and %d:%s", when, len(ms), top(ms), total, wantTop, dumpMessages(ms))
		}
		seen := map[string]int{}
		for i, m := range ms {
			if j, dup := seen[m.text]; dup {
				t.Fatalf("%s: messages %d and %d are the same: a retry posted twice:\n%s", when, j, i, m.text)
			}
			seen[m.text] = i
		}
		return ms
	}
	reachable := func(ms []chatMessage, from, to int) {
		t.Helper()
		var all strings.Builder
		for _, m := range ms {
			all.WriteString(m.text + "\n")
		}
		for _, r := range recs[from:to] {
			if !strings.Contains(all.String(), "Device "+r.device) {
				t.Fatalf("alarm %s (%s) is not reachable from the digest:%s", r.id, r.device, dumpMessages(ms))
			}
		}
	}

	s.apply(recs[:60]...)
	s.advance(30 * time.Second)
	reachable(check("a flood of 60", kit.first), 0, 60)

	// 30 more join; listing the second 25 of them fails once.
	fake.failOnce("Device DEV085")
	s.apply(recs[60:]...)
	s.advance(time.Minute)
	if n := fake.failed(); n != 1 {
		t.Fatalf("the vendor failed %d lists, want 1", n)
	}
	reachable(check("30 more, a list failed once", kit.first+2), 60, 90)

	s.restart()
	ended := []int{0, 7, 13, 20, 26, 33, 39, 46, 61, 85}
	var ends []record
	for _, i := range ended {
		ends = append(ends, s.ends(recs[i]))
	}
	s.apply(ends...)
	s.advance(time.Minute)
	ms := check("10 ends", kit.first+3)
	last := ms[len(ms)-1].text
	for _, i := range ended {
		if !mentions(strings.Split(last, "\n"), "Device "+recs[i].device, "resolved") {
			t.Errorf("the end of %s (%s) is not listed:\n%s", recs[i].id, recs[i].device, last)
		}
	}
	counts := "90 alarms since 08:00 UTC, 80 ongoing"
	if text := fake.digestText(); text != "" {
		if !strings.Contains(text, counts) {
			t.Errorf("the digest's message was not edited to %q:\n%s", counts, text)
		}
	} else if !strings.Contains(last, counts) {
		t.Errorf("the message listing the ends does not show the digest's counts, %q:\n%s", counts, last)
	}
	s.waitBus(100)
}

func dumpMessages(ms []chatMessage) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "\n--- message %d (top-level %v)\n%s", i, m.topLevel, m.text)
	}
	return b.String()
}

// A storm of 700 starts to one DingTalk robot, which takes 20 messages a
// minute and blocks a robot that sends more for 10 minutes: the digest is
// its first message and 28 lists of 25, paced by the sink's limiter over
// the engine's attempts (an attempt whose next message may only go after
// its deadline ends and is retried where the list left off), so that the
// robot never refuses one, and every alarm is listed.
func TestStorm700ToOneDingTalkRobot(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm of 700 alarms")
	}
	const token, secret = "b3f1c0a9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1", "SEC8a1f5e0b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0"
	clk := clock.NewFake(t0)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	s := newScenarioWith(t, clk, rulesHead+"  - name: chat\n    type: dingtalk\n    url_env: DINGTALK_URL\n    secret_env: DINGTALK_SECRET\n"+`
routes:`+busRoute+`
  - name: people
    to: [chat]
`, map[string]string{"DINGTALK_URL": robot.URL(), "DINGTALK_SECRET": secret})
	recs := make([]record, 700)
	for i := range recs {
		recs[i] = s.starts(fmt.Sprintf("storm-%03d", i), fmt.Sprintf("S%d", i%7), fmt.Sprintf("DEV%03d", i), "E_GRID", i%4)
	}
	s.apply(recs[:500]...)
	s.advance(6 * time.Second)
	s.apply(recs[500:]...)
	s.advance(5 * time.Minute)

	for _, m := range robot.Messages() {
		if m.ErrCode != notifytest.DingTalkOK {
			t.Fatalf("the robot refused a message at %s: errcode %d (%s)", m.At.Sub(t0), m.ErrCode, m.ErrMsg)
		}
	}
	got := robot.Accepted()
	if len(got) != 29 {
		t.Fatalf("the robot got %d messages, want the digest and 28 lists of 25", len(got))
	}
	var all strings.Builder
	for _, m := range got {
		all.WriteString(m.Text() + "\n")
	}
	for _, r := range recs {
		if !strings.Contains(all.String(), "Device "+r.device) {
			t.Fatalf("alarm %s (%s) is not listed", r.id, r.device)
		}
	}
	t.Logf("DingTalk: 700 alarms in %d messages, the last %s after the first", len(got), got[len(got)-1].At.Sub(got[0].At))
	s.waitBus(700)
}
