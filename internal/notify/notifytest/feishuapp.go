package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Feishu open platform as an app's bot and its long connection meet
// it, from Feishu's server API reference and its Go SDK
// (larksuite/oapi-sdk-go: core/constants.go, ws/client.go, ws/const.go,
// ws/model.go, ws/pbbp2.pb.go, event/dispatcher/callback/model.go).
const (
	// FeishuAppTokenPath issues a custom app's tenant_access_token:
	// {"app_id","app_secret"} → {"code":0,"tenant_access_token":"t-…","expire":7200}.
	// As the reference says: "tenant_access_token 的最大有效期是 2 小时。
	// 剩余有效期小于 30 分钟时，调用本接口会返回一个新的
	// tenant_access_token，这会同时存在两个有效的 tenant_access_token"
	// (at most 2 hours; with less than 30 minutes left, a new one, and
	// both are valid): until then the same token, expire its seconds left.
	FeishuAppTokenPath = "/open-apis/auth/v3/tenant_access_token/internal"
	// FeishuAppMessagesPath sends (POST ?receive_id_type=chat_id) and,
	// followed by /:message_id, updates a card (PATCH); both take
	// Authorization: Bearer <tenant_access_token>.
	FeishuAppMessagesPath = "/open-apis/im/v1/messages"
	// FeishuAppEndpointPath hands out the long connection's URL:
	// {"AppID","AppSecret"} → {"code":0,"data":{"URL","ClientConfig"}}.
	FeishuAppEndpointPath = "/callback/ws/endpoint"

	feishuTokenLife  = 2 * time.Hour
	feishuTokenRenew = 30 * time.Minute

	// FeishuTokenInvalid answers a request whose token expired or was never
	// issued (the SDK's errCodeTenantAccessTokenInvalid). The fake answers
	// it with HTTP 400, as we believe Feishu does; the sink must read the
	// code on any status.
	FeishuTokenInvalid = 99991663
	// FeishuAppBadSecret answers the token request of a wrong app_id or
	// app_secret: the fake's reading (the reference gives no table).
	FeishuAppBadSecret = 10014
	// FeishuEndpointRefused answers the endpoint request of wrong
	// credentials: any code but 0, 1 and 1000040343 is final for the SDK;
	// the value is the fake's.
	FeishuEndpointRefused = 1000040351
	// FeishuNotShared answers an update of a card that is not shared
	// (config.update_multi true before and after, as the update API
	// requires): the fake's code.
	FeishuNotShared = 230099
	// FeishuCardAction is the callback of a card's button click.
	FeishuCardAction = "card.action.trigger"
)

// FeishuAppCall is one request of the open platform API the fake got.
type FeishuAppCall struct {
	Method, Path string
	// Code is the answer's code; MessageID the card sent or updated;
	// ChatID the chat a card was sent to (receive_id).
	Code      int
	MessageID string
	ChatID    string
	// Card is the card sent or put in place, decoded from content.
	Card map[string]any
}

// FeishuApp is a fake of the open platform for one custom app in one
// tenant: tenant_access_token, sending and updating cards in chats the
// app's bot is in, and the long connection (feishuws.go), speaking pbbp2
// frames (its own protowire encoding), answering pings with pongs, and
// pushing card actions.
type FeishuApp struct {
	t             testing.TB
	server        *httptest.Server
	appID, secret string
	wmu           sync.Mutex // one writer of the long connection at a time

	mu          sync.Mutex
	now         func() time.Time
	chats       map[string]bool
	tokens      map[string]*feishuToken
	current     string // the token the token request hands out
	tokenN      int
	refuseToken bool
	cards       map[string]map[string]any
	msgN        int
	calls       []FeishuAppCall
	ws          feishuLong
	changed     chan struct{}
}

// feishuToken is a tenant_access_token issued.
type feishuToken struct {
	ends    time.Time
	revoked bool
}

// NewFeishuApp starts a fake open platform for app appID with secret, whose
// bot is in the chats named. It is closed when the test ends.
func NewFeishuApp(t testing.TB, appID, secret string, chats ...string) *FeishuApp {
	t.Helper()
	f := &FeishuApp{t: t, appID: appID, secret: secret, now: time.Now, chats: map[string]bool{}, tokens: map[string]*feishuToken{},
		cards: map[string]map[string]any{}, changed: make(chan struct{}),
		ws: feishuLong{seed: strconv.FormatInt(time.Now().UnixNano(), 36), events: map[string]*feishuEvent{}}}
	for _, c := range chats {
		f.chats[c] = true
	}
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.Drop()
		f.server.Close()
	})
	return f
}

// URL returns the platform's base URL.
func (f *FeishuApp) URL() string { return f.server.URL }

// Stamp makes the fake tell the time of tokens with now instead of the
// wall clock.
func (f *FeishuApp) Stamp(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// Tokens returns every token issued: secrets the client must never show.
func (f *FeishuApp) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t := range f.tokens {
		out = append(out, t)
	}
	return out
}

// ExpireTokens makes every token issued so far invalid: the next token
// request gets a new one.
func (f *FeishuApp) ExpireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tokens {
		t.revoked = true
	}
}

// RefuseTokenOnce makes the next API request answer that its token is not
// valid, whatever it is, as Feishu now and then does: the client fetches
// a token again, which is the same one while it has 30 minutes left, and
// repeats the request.
func (f *FeishuApp) RefuseTokenOnce() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuseToken = true
}

// valid reports whether tok is a token the API takes now; f.mu is held.
func (f *FeishuApp) valid(tok string) bool {
	t := f.tokens[tok]
	return t != nil && !t.revoked && f.now().Before(t.ends)
}

// issue answers a token request: the current token while it has 30
// minutes left, else a new one; f.mu is held.
func (f *FeishuApp) issue() (string, time.Duration) {
	now := f.now()
	if f.valid(f.current) && f.tokens[f.current].ends.Sub(now) >= feishuTokenRenew {
		return f.current, f.tokens[f.current].ends.Sub(now)
	}
	f.tokenN++
	f.current = fmt.Sprintf("t-g1044%06dfaketoken%06d", f.tokenN, f.tokenN)
	f.tokens[f.current] = &feishuToken{ends: now.Add(feishuTokenLife)}
	return f.current, feishuTokenLife
}

// Calls returns the API requests so far.
func (f *FeishuApp) Calls() []FeishuAppCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FeishuAppCall{}, f.calls...)
}

// Card returns the card of message id as it now stands, nil when none.
func (f *FeishuApp) Card(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cards[id]
}

// CardText returns the texts of a card, one a line: its title, then the
// content of each element.
func CardText(card map[string]any) string {
	var lines []string
	if h, _ := card["header"].(map[string]any); h != nil {
		title, _ := h["title"].(map[string]any)
		if s, _ := title["content"].(string); s != "" {
			lines = append(lines, s)
		}
	}
	elements, _ := card["elements"].([]any)
	for _, e := range elements {
		if el, _ := e.(map[string]any); el["tag"] != "action" {
			lines = append(lines, feishuTexts(e)...)
		}
	}
	return strings.Join(lines, "\n")
}

// CardButtons returns the buttons of a card: each one's text and the value
// of its callback behaviour.
func CardButtons(card map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	elements, _ := card["elements"].([]any)
	for _, e := range elements {
		el, _ := e.(map[string]any)
		if el["tag"] != "action" {
			continue
		}
		actions, _ := el["actions"].([]any)
		for _, a := range actions {
			b, _ := a.(map[string]any)
			text, _ := b["text"].(map[string]any)
			name, _ := text["content"].(string)
			behaviors, _ := b["behaviors"].([]any)
			for _, bh := range behaviors {
				if m, _ := bh.(map[string]any); m["type"] == "callback" {
					v, _ := m["value"].(map[string]any)
					out[name] = v
				}
			}
		}
	}
	return out
}

func (f *FeishuApp) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == feishuAppWSPath:
		f.serveWS(w, r)
		return
	case r.Method == http.MethodPost && r.URL.Path == FeishuAppTokenPath:
		var req struct {
			AppID     string `json:"app_id"`
			AppSecret string `json:"app_secret"`
		}
		_ = json.Unmarshal(readBody(r), &req)
		if req.AppID != f.appID || req.AppSecret != f.secret {
			feishuAnswer(w, http.StatusOK, map[string]any{"code": FeishuAppBadSecret, "msg": "app secret invalid"})
			return
		}
		f.mu.Lock()
		tok, left := f.issue()
		f.mu.Unlock()
		feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": tok, "expire": int(left / time.Second)})
		return
	case r.Method == http.MethodPost && r.URL.Path == FeishuAppEndpointPath:
		f.serveEndpoint(w, r)
		return
	}
	call := FeishuAppCall{Method: r.Method, Path: r.URL.Path}
	body := readBody(r)
	f.mu.Lock()
	defer func() {
		f.calls = append(f.calls, call)
		f.mu.Unlock()
	}()
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	refuse := f.refuseToken
	f.refuseToken = false
	if refuse || !f.valid(tok) {
		call.Code = FeishuTokenInvalid
		feishuAnswer(w, http.StatusBadRequest, map[string]any{"code": FeishuTokenInvalid, "msg": "Invalid access token for authorization. Please make a request with token attached."})
		return
	}
	var req struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
	}
	if json.Unmarshal(body, &req) != nil || json.Unmarshal([]byte(req.Content), &call.Card) != nil || call.Card == nil {
		call.Code = 230001
		feishuAnswer(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid content"})
		return
	}
	switch id, isPatch := strings.CutPrefix(r.URL.Path, FeishuAppMessagesPath+"/"); {
	case r.Method == http.MethodPost && r.URL.Path == FeishuAppMessagesPath:
		if r.URL.Query().Get("receive_id_type") != "chat_id" || !f.chats[req.ReceiveID] || req.MsgType != "interactive" {
			call.Code = 230002
			feishuAnswer(w, http.StatusBadRequest, map[string]any{"code": 230002, "msg": "bot is not in the chat"})
			return
		}
		f.msgN++
		call.MessageID, call.ChatID = fmt.Sprintf("om_fake%04d", f.msgN), req.ReceiveID
		f.cards[call.MessageID] = call.Card
		feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{"message_id": call.MessageID, "chat_id": req.ReceiveID}})
	case r.Method == http.MethodPatch && isPatch:
		call.MessageID = id
		old := f.cards[id]
		if old == nil {
			call.Code = 230011
			feishuAnswer(w, http.StatusBadRequest, map[string]any{"code": 230011, "msg": "message not found"})
			return
		}
		if !feishuShared(old) || !feishuShared(call.Card) {
			call.Code = FeishuNotShared
			feishuAnswer(w, http.StatusBadRequest, map[string]any{"code": FeishuNotShared, "msg": "card is not shared: set config.update_multi"})
			return
		}
		f.cards[id] = call.Card
		feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
	default:
		call.Code = http.StatusNotFound
		w.WriteHeader(http.StatusNotFound)
	}
}

func feishuShared(card map[string]any) bool {
	c, _ := card["config"].(map[string]any)
	return c["update_multi"] == true
}

func feishuAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// notify wakes those waiting for a change; f.mu is held.
func (f *FeishuApp) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor waits up to 10 s of real time for cond, checked under f.mu.
func (f *FeishuApp) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("feishu fake: waited 10 s for %s", what)
		}
	}
}
