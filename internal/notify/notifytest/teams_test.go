package notifytest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postTeams posts body to hook and returns the status, the error code of
// the answer and its Retry-After.
func postTeams(t *testing.T, hook string, body any) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(hook, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans.Error.Code, resp.Header.Get("Retry-After")
}

// teamsCard is a message as Microsoft's Workflows samples post it.
func teamsCard(version string, body ...any) map[string]any {
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"contentUrl":  nil,
			"content": map[string]any{
				"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
				"type":    "AdaptiveCard", "version": version, "body": body,
			},
		}},
	}
}

func TestTeamsFakeChecksTheTriggerURLAndTheCard(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewTeams(t, "Jq2dHk7_x9LmN0pQ-rS3tUvWxYz4AbCdEfGhIjKlMnO", func() time.Time { return now })
	card := teamsCard("1.4", map[string]any{"type": "TextBlock", "text": "URGENT alarm a1"},
		map[string]any{"type": "FactSet", "facts": []any{map[string]any{"title": "Alarm", "value": "a1"}}})
	without := func(param string) string {
		u := f.URL()
		i := strings.Index(u, param+"=")
		end := strings.IndexByte(u[i:], '&')
		if end < 0 {
			return strings.TrimSuffix(u[:i], "&")
		}
		return u[:i] + u[i+end+1:]
	}
	cases := []struct {
		name   string
		hook   string
		body   any
		status int
		code   string
	}{
		{"signed card", f.URL(), card, http.StatusAccepted, ""},
		{"wrong sig", strings.Replace(f.URL(), "sig=Jq2", "sig=XXX", 1), card, http.StatusUnauthorized, "DirectApiInvalidAuthorizationSignature"},
		{"no sig", without("sig"), card, http.StatusUnauthorized, "AuthorizationFailed"},
		{"no sp", without("sp"), card, http.StatusUnauthorized, "AuthorizationFailed"},
		{"no api-version", without("api-version"), card, http.StatusBadRequest, "MissingApiVersionParameter"},
		{"deleted workflow", strings.Replace(f.URL(), "/workflows/8e4f", "/workflows/0000", 1), card, http.StatusNotFound, "WorkflowNotFound"},
		{"connector MessageCard", f.URL(), map[string]any{"@type": "MessageCard", "text": "hi"}, http.StatusBadRequest, "InvalidRequestContent"},
		{"card version 1.5", f.URL(), teamsCard("1.5", map[string]any{"type": "TextBlock", "text": "x"}), http.StatusBadRequest, "InvalidRequestContent"},
		{"empty card", f.URL(), teamsCard("1.4"), http.StatusBadRequest, "InvalidRequestContent"},
		{"over 28 KB", f.URL(), teamsCard("1.4", map[string]any{"type": "TextBlock", "text": strings.Repeat("x", 29<<10)}), http.StatusRequestEntityTooLarge, "RequestEntityTooLarge"},
	}
	for _, c := range cases {
		now = now.Add(time.Second)
		if status, code, _ := postTeams(t, c.hook, c.body); status != c.status || code != c.code {
			t.Errorf("%s: HTTP %d %q, want %d %q", c.name, status, code, c.status, c.code)
		}
	}
	got := f.Accepted()
	if len(got) != 1 || got[0].Text() != "URGENT alarm a1\nAlarm: a1" {
		t.Fatalf("accepted %d messages: %+v", len(got), got)
	}
}

func TestTeamsFakeThrottlesWithRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewTeams(t, "sig-value-1234", func() time.Time { return now })
	card := teamsCard("1.4", map[string]any{"type": "TextBlock", "text": "x"})
	for i := range TeamsPerSecond {
		if status, code, _ := postTeams(t, f.URL(), card); status != http.StatusAccepted {
			t.Fatalf("message %d: HTTP %d %s", i, status, code)
		}
	}
	if status, _, after := postTeams(t, f.URL(), card); status != http.StatusTooManyRequests || after != "1" {
		t.Fatalf("5th message in a second: HTTP %d, Retry-After %q, want 429 after 1", status, after)
	}
	// 100 in a minute: 4 a second for 24 more seconds, then the minute is full.
	for range 24 {
		now = now.Add(time.Second)
		for range TeamsPerSecond {
			postTeams(t, f.URL(), card)
		}
	}
	now = now.Add(time.Second)
	if status, _, after := postTeams(t, f.URL(), card); status != http.StatusTooManyRequests || after != "35" {
		t.Fatalf("101st message in a minute: HTTP %d, Retry-After %q, want 429 after 35", status, after)
	}
	now = now.Add(35 * time.Second)
	if status, _, _ := postTeams(t, f.URL(), card); status != http.StatusAccepted {
		t.Fatalf("after Retry-After: HTTP %d, want 202", status)
	}
}

func TestTeamsFakeChecksElementsAndShowCardActions(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f := NewTeams(t, "sig-value-1234", func() time.Time { return now })
	withActions := func(actions ...any) map[string]any {
		m := teamsCard("1.4", map[string]any{"type": "TextBlock", "text": "Alarm storm"})
		m["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)["actions"] = actions
		return m
	}
	showCard := func(card any) map[string]any {
		return map[string]any{"type": "Action.ShowCard", "title": "Show the 2 alarms", "card": card}
	}
	list := map[string]any{"type": "AdaptiveCard", "body": []any{
		map[string]any{"type": "TextBlock", "text": "URGENT a1"}, map[string]any{"type": "TextBlock", "text": "MINOR a2"}}}
	cases := []struct {
		name   string
		body   any
		status int
	}{
		{"a list behind a ShowCard", withActions(showCard(list)), http.StatusAccepted},
		{"an element of no version", teamsCard("1.4", map[string]any{"type": "Carousel", "text": "x"}), http.StatusBadRequest},
		{"a TextBlock without text", teamsCard("1.4", map[string]any{"type": "TextBlock"}), http.StatusBadRequest},
		{"an action of no version", withActions(map[string]any{"type": "Action.Popover", "title": "x"}), http.StatusBadRequest},
		{"an action without title", withActions(map[string]any{"type": "Action.ShowCard", "card": list}), http.StatusBadRequest},
		{"a ShowCard without card", withActions(map[string]any{"type": "Action.ShowCard", "title": "x"}), http.StatusBadRequest},
		{"a ShowCard of an empty card", withActions(showCard(map[string]any{"type": "AdaptiveCard", "body": []any{}})), http.StatusBadRequest},
		{"a ShowCard of a bad element", withActions(showCard(map[string]any{"type": "AdaptiveCard", "body": []any{map[string]any{"type": "Nope"}}})), http.StatusBadRequest},
	}
	for _, c := range cases {
		now = now.Add(time.Second)
		if status, code, _ := postTeams(t, f.URL(), c.body); status != c.status {
			t.Errorf("%s: HTTP %d %q, want %d", c.name, status, code, c.status)
		}
	}
	got := f.Accepted()
	if len(got) != 1 {
		t.Fatalf("accepted %d messages, want the one with a list", len(got))
	}
	if text := got[0].Text(); text != "Alarm storm\nShow the 2 alarms\nURGENT a1\nMINOR a2" {
		t.Errorf("Text() = %q", text)
	}
	if hidden := got[0].Hidden(); hidden != "URGENT a1\nMINOR a2" {
		t.Errorf("Hidden() = %q", hidden)
	}
}
