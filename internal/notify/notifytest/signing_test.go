package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The senders below sign as the vendors' own sample code does, apart from
// the fakes' verifiers.

// post posts body to a fake robot and returns its answer: errcode and
// errmsg (DingTalk, WeCom) or code and msg (Feishu), always with HTTP 200.
func post(t *testing.T, hook, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(hook, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
		Code    *int   `json:"code"`
		Msg     string `json:"msg"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ans) != nil || (ans.ErrCode == nil && ans.Code == nil) {
		t.Fatalf("HTTP %d, or not the robot's JSON answer", resp.StatusCode)
	}
	if ans.ErrCode != nil {
		return *ans.ErrCode, ans.ErrMsg
	}
	return *ans.Code, ans.Msg
}

func postDingTalk(t *testing.T, hook, secret string, at time.Time) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "\n" + secret))
	sign := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return post(t, hook+"&timestamp="+ts+"&sign="+sign, `{"msgtype":"markdown","markdown":{"title":"alarm","text":"## alarm"}}`)
}

func TestDingTalkFakeVerifiesAsTheVendorDocuments(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	d := NewDingTalk(t, "robot-token", "SECright", clock)
	cases := []struct {
		name   string
		hook   string
		secret string
		at     time.Time
		code   int
		msg    string
	}{
		{"signed now", d.URL(), "SECright", now, DingTalkOK, "ok"},
		{"signed 59 minutes ago", d.URL(), "SECright", now.Add(-59 * time.Minute), DingTalkOK, "ok"},
		{"wrong secret", d.URL(), "SECwrong", now, DingTalkBadSign, "sign not match"},
		{"stale timestamp", d.URL(), "SECright", now.Add(-61 * time.Minute), DingTalkBadSign, "invalid timestamp"},
		{"timestamp from the future", d.URL(), "SECright", now.Add(2 * time.Hour), DingTalkBadSign, "invalid timestamp"},
		{"wrong token", strings.Replace(d.URL(), "robot-token", "other", 1), "SECright", now, DingTalkBadToken, "token is not exist"},
	}
	for _, c := range cases {
		if code, msg := postDingTalk(t, c.hook, c.secret, c.at); code != c.code || msg != c.msg {
			t.Errorf("%s: errcode %d %q, want %d %q", c.name, code, msg, c.code, c.msg)
		}
	}
}

func TestDingTalkFakeBlocksTheRobotAfter20MessagesAMinute(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	d := NewDingTalk(t, "robot-token", "SECright", func() time.Time { return now })
	for i := range 20 {
		if code, msg := postDingTalk(t, d.URL(), "SECright", now); code != 0 {
			t.Fatalf("message %d: errcode %d %s", i+1, code, msg)
		}
		now = now.Add(time.Second)
	}
	if code, _ := postDingTalk(t, d.URL(), "SECright", now); code != DingTalkTooFast {
		t.Fatalf("21st message in a minute: errcode %d, want %d", code, DingTalkTooFast)
	}
	now = now.Add(5 * time.Minute)
	if code, _ := postDingTalk(t, d.URL(), "SECright", now); code != DingTalkTooFast {
		t.Fatalf("5 min into the block: errcode %d, want %d", code, DingTalkTooFast)
	}
	now = now.Add(5*time.Minute + time.Second)
	if code, _ := postDingTalk(t, d.URL(), "SECright", now); code != DingTalkOK {
		t.Fatalf("after the 10-minute block: errcode %d, want 0", code)
	}
}

func postFeishu(t *testing.T, hook, secret string, at time.Time, pad int) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(ts+"\n"+secret))
	mac.Write([]byte{})
	body, _ := json.Marshal(map[string]any{
		"timestamp": ts, "sign": base64.StdEncoding.EncodeToString(mac.Sum(nil)),
		"msg_type": "text", "content": map[string]string{"text": "alarm" + strings.Repeat(".", pad)},
	})
	return post(t, hook, string(body))
}

func TestFeishuFakeVerifiesAsTheVendorDocuments(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewFeishu(t, "hook-token", "right-secret", func() time.Time { return now })
	cases := []struct {
		name   string
		secret string
		at     time.Time
		pad    int
		code   int
	}{
		{"signed now", "right-secret", now, 0, FeishuOK},
		{"wrong secret", "wrong-secret", now, 0, FeishuBadSign},
		{"stale timestamp", "right-secret", now.Add(-61 * time.Minute), 0, FeishuBadSign},
		{"body over 20 KB", "right-secret", now, 21 << 10, FeishuBadRequest},
	}
	for _, c := range cases {
		if code, msg := postFeishu(t, f.URL(), c.secret, c.at, c.pad); code != c.code {
			t.Errorf("%s: code %d %q, want %d", c.name, code, msg, c.code)
		}
	}
}

func TestFeishuFakeLimitsFiveMessagesASecond(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewFeishu(t, "hook-token", "right-secret", func() time.Time { return now })
	var codes []string
	for range 6 {
		code, _ := postFeishu(t, f.URL(), "right-secret", now, 0)
		codes = append(codes, fmt.Sprint(code))
	}
	if got := strings.Join(codes, " "); got != "0 0 0 0 0 11232" {
		t.Fatalf("codes of 6 messages in one second: %s, want five accepted then %d", got, FeishuTooFast)
	}
	now = now.Add(time.Second)
	if code, _ := postFeishu(t, f.URL(), "right-secret", now, 0); code != FeishuOK {
		t.Fatalf("a second later: code %d, want 0", code)
	}
}

func postFeishuBody(t *testing.T, hook string, body map[string]any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	return post(t, hook, string(b))
}

func TestFeishuFakeChecksTheTokenAndTheCardAndKeepsItsTexts(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewFeishu(t, "hook-token", "", func() time.Time { return now })
	card := map[string]any{
		"msg_type": "interactive",
		"card": map[string]any{
			"header":   map[string]any{"template": "red", "title": map[string]any{"tag": "plain_text", "content": "URGENT alarm"}},
			"elements": []any{map[string]any{"tag": "div", "text": map[string]any{"tag": "lark_md", "content": "**Alarm:** a1"}}},
		},
	}
	cases := []struct {
		name string
		hook string
		body map[string]any
		code int
	}{
		{"unsigned card to a bot without a secret", f.URL(), card, FeishuOK},
		{"wrong token", strings.Replace(f.URL(), "hook-token", "other", 1), card, FeishuBadToken},
		{"unknown msg_type", f.URL(), map[string]any{"msg_type": "carousel"}, FeishuBadParam},
		{"card without elements", f.URL(), map[string]any{"msg_type": "interactive", "card": map[string]any{}}, FeishuBadParam},
	}
	for _, c := range cases {
		if code, msg := postFeishuBody(t, c.hook, c.body); code != c.code {
			t.Errorf("%s: code %d %q, want %d", c.name, code, msg, c.code)
		}
	}
	got := f.Accepted()
	if len(got) != 1 || got[0].Text() != "URGENT alarm\n**Alarm:** a1" || got[0].Template() != "red" {
		t.Fatalf("accepted %d messages, the first %q", len(got), got[0].Text())
	}
}

func TestFeishuFakeChecksCollapsiblePanels(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewFeishu(t, "hook-token", "", func() time.Time { return now })
	div := func(text string) map[string]any {
		return map[string]any{"tag": "div", "text": map[string]any{"tag": "lark_md", "content": text}}
	}
	withPanel := func(p map[string]any) map[string]any {
		p["tag"] = "collapsible_panel"
		return map[string]any{"msg_type": "interactive", "card": map[string]any{
			"header":   map[string]any{"template": "red", "title": map[string]any{"tag": "plain_text", "content": "Alarm storm"}},
			"elements": []any{div("urgent 2 (2 ongoing)"), p},
		}}
	}
	title := map[string]any{"title": map[string]any{"tag": "plain_text", "content": "Show the 2 alarms"}}
	nested := func(depth int) map[string]any {
		p := map[string]any{"tag": "collapsible_panel", "header": title, "elements": []any{div("a1")}}
		for range depth {
			p = map[string]any{"tag": "collapsible_panel", "header": title, "elements": []any{p}}
		}
		return p
	}
	cases := []struct {
		name string
		body map[string]any
		code int
	}{
		{"a panel of the list", withPanel(map[string]any{"header": title, "elements": []any{div("URGENT a1\nMINOR a2")}}), FeishuOK},
		{"a panel without title", withPanel(map[string]any{"elements": []any{div("a1")}}), FeishuBadParam},
		{"a panel without elements", withPanel(map[string]any{"header": title}), FeishuBadParam},
		{"a panel holding a form", withPanel(map[string]any{"header": title, "elements": []any{map[string]any{"tag": "form"}}}), FeishuBadParam},
		{"an unknown tag in a panel", withPanel(map[string]any{"header": title, "elements": []any{map[string]any{"tag": "carousel"}}}), FeishuBadParam},
		{"four panels nested", withPanel(nested(3)), FeishuOK},
		{"six panels nested", withPanel(nested(5)), FeishuBadParam},
	}
	for _, c := range cases {
		now = now.Add(time.Second)
		if code, msg := postFeishuBody(t, f.URL(), c.body); code != c.code {
			t.Errorf("%s: code %d %q, want %d", c.name, code, msg, c.code)
		}
	}
	got := f.Accepted()
	if len(got) != 2 || got[0].Text() != "Alarm storm\nurgent 2 (2 ongoing)\nURGENT a1\nMINOR a2" || got[0].Panels() != "URGENT a1\nMINOR a2" {
		t.Fatalf("accepted %d messages: %v", len(got), got)
	}
}
