package notifytest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func markdownBody(content string) string {
	b, _ := json.Marshal(map[string]any{"msgtype": "markdown", "markdown": map[string]string{"content": content}})
	return string(b)
}

func TestWeComFakeAnswersAsTheVendorDocuments(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	w := NewWeCom(t, "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa", func() time.Time { return now })
	cases := []struct {
		name string
		hook string
		body string
		code int
	}{
		{"markdown", w.URL(), markdownBody("## alarm"), WeComOK},
		{"markdown of 4096 bytes", w.URL(), markdownBody(strings.Repeat("告", 1365) + "a"), WeComOK},
		{"markdown of 4097 bytes", w.URL(), markdownBody(strings.Repeat("告", 1365) + "ab"), WeComBadParam},
		{"text", w.URL(), `{"msgtype":"text","text":{"content":"alarm","mentioned_mobile_list":["13800001111"]}}`, WeComOK},
		{"text over 2048 bytes", w.URL(), `{"msgtype":"text","text":{"content":"` + strings.Repeat("a", 2049) + `"}}`, WeComBadParam},
		{"empty content", w.URL(), markdownBody(""), WeComEmpty},
		{"unknown msgtype", w.URL(), `{"msgtype":"card","card":{}}`, WeComBadType},
		{"not JSON", w.URL(), `{"msgtype":`, WeComBadParam},
		{"wrong key", strings.Replace(w.URL(), "key=693a", "key=000a", 1), markdownBody("## alarm"), WeComBadKey},
		{"no key", strings.Split(w.URL(), "?")[0], markdownBody("## alarm"), WeComBadKey},
	}
	for _, c := range cases {
		if code, msg := post(t, c.hook, c.body); code != c.code {
			t.Errorf("%s: errcode %d %q, want %d", c.name, code, msg, c.code)
		}
	}
	if got := len(w.Accepted()); got != 3 {
		t.Errorf("accepted %d messages, want 3", got)
	}
}

func TestWeComFakeRefusesMoreThan20MessagesAMinute(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	w := NewWeCom(t, "robot-key", func() time.Time { return now })
	for i := range 20 {
		if code, msg := post(t, w.URL(), markdownBody("alarm")); code != WeComOK {
			t.Fatalf("message %d: errcode %d %s", i+1, code, msg)
		}
		now = now.Add(time.Second)
	}
	if code, _ := post(t, w.URL(), markdownBody("alarm")); code != WeComTooFast {
		t.Fatalf("21st message in a minute: errcode %d, want %d", code, WeComTooFast)
	}
	// The first message leaves the window 60 s after it was taken.
	now = now.Add(40 * time.Second)
	if code, msg := post(t, w.URL(), markdownBody("alarm")); code != WeComOK {
		t.Fatalf("a minute after the first: errcode %d %s, want 0", code, msg)
	}
}
