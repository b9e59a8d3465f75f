package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// Methods a SlackCall records.
const (
	MethodPostMessage   = "chat.postMessage"
	MethodUpdate        = "chat.update"
	MethodPostEphemeral = "chat.postEphemeral"
	MethodUserGroups    = "usergroups.list"
	MethodWebhook       = "webhook"
)

// SlackCall is one request the fake Slack received.
type SlackCall struct {
	// Method is MethodPostMessage, MethodUpdate, MethodPostEphemeral,
	// MethodUserGroups or MethodWebhook.
	Method string
	// Token is the bot token the request carried.
	Token   string
	Channel string
	// User is whom a chat.postEphemeral was for.
	User string
	Text string
	// TS is the ts of the message posted (chat.postMessage) or updated
	// (chat.update).
	TS string
	// ThreadTS is the thread a chat.postMessage replied in.
	ThreadTS    string
	Attachments []slack.Attachment
	// Status is the HTTP status the fake answered with.
	Status int
	// Error is the Slack error it answered with ("" when ok).
	Error string
	// At is when the call arrived, by the clock given to Stamp.
	At time.Time
}

// SlackMessage is a message as it stands in the fake's channels.
type SlackMessage struct {
	Channel     string
	TS          string
	ThreadTS    string
	Text        string
	Attachments []slack.Attachment
}

// SlackFailure is an answer the fake gives instead of doing the call.
type SlackFailure struct {
	// Status is the HTTP status (default 200, with ok:false and Error).
	Status int
	// RetryAfter is the Retry-After header, if any.
	RetryAfter string
	// Error is the Slack error code of an ok:false answer, such as
	// "channel_not_found".
	Error string
}

// Slack is a fake Slack speaking chat.postMessage and chat.update of the
// Web API under /api/, and incoming webhooks under /services/. It records
// every call and keeps the messages so that tests can read them back.
type Slack struct {
	server *httptest.Server
	token  string

	mu       sync.Mutex
	calls    []SlackCall
	messages map[string]*SlackMessage // by channel + "/" + ts
	seq      int
	failures map[string][]SlackFailure
	now      func() time.Time
	groups   []slack.UserGroup
	socket   *SlackSocket
}

// NewSlack starts a fake Slack for t that accepts the bot token token. It
// is closed when the test ends.
func NewSlack(t testing.TB, token string) *Slack {
	t.Helper()
	s := &Slack{token: token, messages: map[string]*SlackMessage{}, failures: map[string][]SlackFailure{}}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
	return s
}

// APIURL returns the Web API base URL, with the trailing slash slack-go
// needs.
func (s *Slack) APIURL() string { return s.server.URL + "/api/" }

// WebhookURL returns an incoming-webhook URL whose path ends in secret.
func (s *Slack) WebhookURL(secret string) string {
	return s.server.URL + "/services/T000/B000/" + secret
}

// Stamp makes the fake record each call's arrival by now (a test's fake
// clock), in SlackCall.At.
func (s *Slack) Stamp(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Fail makes the next call of method answer f instead; several Fails
// queue up.
func (s *Slack) Fail(method string, f SlackFailure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// Calls returns every call received so far, in order.
func (s *Slack) Calls() []SlackCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlackCall(nil), s.calls...)
}

// Message returns the message ts of channel as it now stands.
func (s *Slack) Message(channel, ts string) (SlackMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channel+"/"+ts]
	if !ok {
		return SlackMessage{}, false
	}
	return *m, true
}

// SetUserGroups sets the user groups usergroups.list answers with.
func (s *Slack) SetUserGroups(groups ...slack.UserGroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = groups
}

func (s *Slack) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sock := s.socket
	s.mu.Unlock()
	if sock != nil && strings.HasPrefix(r.URL.Path, socketPath) {
		sock.serveLink(w, r)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case sock != nil && r.URL.Path == "/api/"+MethodConnectionsOpen:
		sock.serveOpen(w, r)
	case r.URL.Path == "/api/"+MethodPostMessage || r.URL.Path == "/api/"+MethodUpdate ||
		r.URL.Path == "/api/"+MethodPostEphemeral || r.URL.Path == "/api/"+MethodUserGroups:
		s.serveAPI(w, r, strings.TrimPrefix(r.URL.Path, "/api/"))
	case strings.HasPrefix(r.URL.Path, "/services/"):
		s.serveWebhook(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Slack) serveAPI(w http.ResponseWriter, r *http.Request, method string) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := SlackCall{
		Method:   method,
		Token:    r.PostForm.Get("token"),
		Channel:  r.PostForm.Get("channel"),
		User:     r.PostForm.Get("user"),
		Text:     r.PostForm.Get("text"),
		TS:       r.PostForm.Get("ts"),
		ThreadTS: r.PostForm.Get("thread_ts"),
		Status:   http.StatusOK,
	}
	if c.Token == "" {
		c.Token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if a := r.PostForm.Get("attachments"); a != "" {
		if err := json.Unmarshal([]byte(a), &c.Attachments); err != nil {
			http.Error(w, "attachments: "+err.Error(), http.StatusBadRequest)
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.failure(&c); ok {
		writeFailure(w, f)
		return
	}
	answer := map[string]any{"ok": true, "channel": c.Channel}
	switch {
	case c.Token != s.token:
		c.Error = "invalid_auth"
	case method == MethodUserGroups:
		answer = map[string]any{"ok": true, "usergroups": s.userGroups(r.PostForm.Get("include_users") == "true")}
	case c.Channel == "":
		c.Error = "channel_not_found"
	case method == MethodPostEphemeral:
		if c.User == "" {
			c.Error = "user_not_found"
			break
		}
		s.seq++
		answer["message_ts"] = fmt.Sprintf("1700000000.%06d", s.seq)
	case method == MethodPostMessage:
		s.seq++
		c.TS = fmt.Sprintf("1700000000.%06d", s.seq)
		s.messages[c.Channel+"/"+c.TS] = &SlackMessage{Channel: c.Channel, TS: c.TS, ThreadTS: c.ThreadTS, Text: c.Text, Attachments: c.Attachments}
		answer["ts"] = c.TS
	default:
		m, ok := s.messages[c.Channel+"/"+c.TS]
		if !ok {
			c.Error = "message_not_found"
			break
		}
		m.Text, m.Attachments = c.Text, c.Attachments
		answer["ts"] = c.TS
	}
	s.calls = append(s.calls, c)
	if c.Error != "" {
		answer = map[string]any{"ok": false, "error": c.Error}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// userGroups is what usergroups.list answers: the groups, each with its
// members only when the request asked for them (include_users); s.mu must
// be held.
func (s *Slack) userGroups(withUsers bool) []slack.UserGroup {
	out := make([]slack.UserGroup, len(s.groups))
	for i, g := range s.groups {
		g.IsUserGroup, g.UserCount = true, len(g.Users)
		if !withUsers {
			g.Users = nil
		}
		out[i] = g
	}
	return out
}

func (s *Slack) serveWebhook(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Text        string             `json:"text"`
		Attachments []slack.Attachment `json:"attachments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil || msg.Text == "" {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	c := SlackCall{Method: MethodWebhook, Text: msg.Text, Attachments: msg.Attachments, Status: http.StatusOK}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.failure(&c); ok {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		http.Error(w, f.Error, f.Status)
		return
	}
	s.calls = append(s.calls, c)
	_, _ = w.Write([]byte("ok"))
}

// stamp returns the arrival time of a call; s.mu must be held.
func (s *Slack) stamp() time.Time {
	if s.now == nil {
		return time.Time{}
	}
	return s.now()
}

// failure stamps c and, when a failure is queued for its method, records
// c as failed by it and returns it; s.mu must be held.
func (s *Slack) failure(c *SlackCall) (SlackFailure, bool) {
	c.At = s.stamp()
	f, ok := s.nextFailure(c.Method)
	if ok {
		c.Status, c.Error = f.Status, f.Error
		s.calls = append(s.calls, *c)
	}
	return f, ok
}

// nextFailure pops the next queued failure of method; s.mu must be held.
func (s *Slack) nextFailure(method string) (SlackFailure, bool) {
	q := s.failures[method]
	if len(q) == 0 {
		return SlackFailure{}, false
	}
	s.failures[method] = q[1:]
	f := q[0]
	if f.Status == 0 {
		f.Status = http.StatusOK
	}
	return f, true
}

func writeFailure(w http.ResponseWriter, f SlackFailure) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	if f.Status == http.StatusOK {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": f.Error})
		return
	}
	_, _ = w.Write([]byte(`<html>error</html>`))
}
