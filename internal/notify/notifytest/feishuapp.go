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

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"
)

// The Feishu open platform as an app's bot and its long connection meet
// it, from Feishu's server API reference and its Go SDK
// (larksuite/oapi-sdk-go: core/constants.go, ws/client.go, ws/const.go,
// ws/model.go, ws/pbbp2.pb.go, event/dispatcher/callback/model.go).
const (
	// FeishuAppTokenPath issues a custom app's tenant_access_token:
	// {"app_id","app_secret"} → {"code":0,"tenant_access_token":"t-…","expire":7200}.
	FeishuAppTokenPath = "/open-apis/auth/v3/tenant_access_token/internal"
	// FeishuAppMessagesPath sends (POST ?receive_id_type=chat_id) and,
	// followed by /:message_id, updates a card (PATCH); both take
	// Authorization: Bearer <tenant_access_token>.
	FeishuAppMessagesPath = "/open-apis/im/v1/messages"
	// FeishuAppEndpointPath hands out the long connection's URL:
	// {"AppID","AppSecret"} → {"code":0,"data":{"URL","ClientConfig"}}.
	FeishuAppEndpointPath = "/callback/ws/endpoint"
	feishuAppWSPath       = "/ws"

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

// FeishuWSResponse is one answer the client sent over the long connection
// to a data frame the fake pushed.
type FeishuWSResponse struct {
	MessageID string
	// Latency is the time from the push of the message's last part to the
	// answer, in real time.
	Latency time.Duration
	// Code is the response's code (200); Toast the callback's toast.
	Code             int
	ToastType, Toast string
	Headers          map[string]string
	SeqID, LogID     uint64
	Service, Method  int32
	BizRt            string
}

// FeishuApp is a fake of the open platform for one custom app in one
// tenant: tenant_access_token, sending and updating cards in chats the
// app's bot is in, and the long connection, speaking pbbp2 frames (its own
// protowire encoding), answering pings with pongs, and pushing card
// actions.
type FeishuApp struct {
	t             testing.TB
	server        *httptest.Server
	appID, secret string

	mu        sync.Mutex
	chats     map[string]bool
	tokens    map[string]bool
	tokenN    int
	cards     map[string]map[string]any
	msgN      int
	calls     []FeishuAppCall
	ticket    string
	conn      *websocket.Conn
	wmu       sync.Mutex
	connects  int
	pings     int
	pushN     int
	pushed    map[string]time.Time
	responses []FeishuWSResponse
	changed   chan struct{}
}

// NewFeishuApp starts a fake open platform for app appID with secret, whose
// bot is in the chats named. It is closed when the test ends.
func NewFeishuApp(t testing.TB, appID, secret string, chats ...string) *FeishuApp {
	t.Helper()
	f := &FeishuApp{t: t, appID: appID, secret: secret, chats: map[string]bool{}, tokens: map[string]bool{},
		cards: map[string]map[string]any{}, pushed: map[string]time.Time{}, changed: make(chan struct{})}
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

// Tokens returns every token issued, and Ticket the long connection's
// current ticket: secrets the client must never show.
func (f *FeishuApp) Tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t := range f.tokens {
		out = append(out, t)
	}
	return out
}

// Ticket returns the access ticket in the long connection's URL.
func (f *FeishuApp) Ticket() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ticket
}

// ExpireTokens makes every token issued so far invalid.
func (f *FeishuApp) ExpireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.tokens {
		f.tokens[t] = false
	}
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
		f.tokenN++
		tok := fmt.Sprintf("t-g1044%06dfaketoken%06d", f.tokenN, f.tokenN)
		f.tokens[tok] = true
		f.mu.Unlock()
		feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": tok, "expire": 7200})
		return
	case r.Method == http.MethodPost && r.URL.Path == FeishuAppEndpointPath:
		var req struct{ AppID, AppSecret string }
		_ = json.Unmarshal(readBody(r), &req)
		if req.AppID != f.appID || req.AppSecret != f.secret {
			feishuAnswer(w, http.StatusOK, map[string]any{"code": FeishuEndpointRefused, "msg": "invalid app_id or app_secret"})
			return
		}
		f.mu.Lock()
		f.ticket = fmt.Sprintf("tk%dsecretticket%d", f.connects+1, time.Now().UnixNano()%1e6)
		ticket := f.ticket
		f.mu.Unlock()
		u := "ws" + strings.TrimPrefix(f.server.URL, "http") + feishuAppWSPath + "?device_id=dev1&service_id=33&access_key=" + ticket
		feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
			"URL": u, "ClientConfig": map[string]any{"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 120}}})
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
	if !f.tokens[tok] {
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

// pbbp2 frames, as ws/pbbp2.pb.go numbers them: 1 SeqID, 2 LogID,
// 3 service, 4 method, 5 headers {1 key, 2 value}, 6 payload_encoding,
// 7 payload_type, 8 payload, 9 LogIDNew.
type fakeFrame struct {
	seqID, logID    uint64
	service, method int32
	headers         [][2]string
	payload         []byte
}

func (fr fakeFrame) header(k string) string {
	for _, h := range fr.headers {
		if h[0] == k {
			return h[1]
		}
	}
	return ""
}

func (fr fakeFrame) encode() []byte {
	var b []byte
	for _, v := range []struct {
		n protowire.Number
		v uint64
	}{{1, fr.seqID}, {2, fr.logID}, {3, uint64(fr.service)}, {4, uint64(fr.method)}} {
		b = protowire.AppendTag(b, v.n, protowire.VarintType)
		b = protowire.AppendVarint(b, v.v)
	}
	for _, h := range fr.headers {
		var hb []byte
		hb = protowire.AppendTag(hb, 1, protowire.BytesType)
		hb = protowire.AppendString(hb, h[0])
		hb = protowire.AppendTag(hb, 2, protowire.BytesType)
		hb = protowire.AppendString(hb, h[1])
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, hb)
	}
	if fr.payload != nil {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, fr.payload)
	}
	return b
}

func decodeFakeFrame(b []byte) (fakeFrame, error) {
	var fr fakeFrame
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fr, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fr, protowire.ParseError(n)
			}
			b = b[n:]
			switch num {
			case 1:
				fr.seqID = v
			case 2:
				fr.logID = v
			case 3:
				fr.service = int32(v)
			case 4:
				fr.method = int32(v)
			}
			continue
		}
		if typ != protowire.BytesType {
			return fr, fmt.Errorf("field %d of wire type %d", num, typ)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fr, protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 5:
			var h [2]string
			for hb := v; len(hb) > 0; {
				hn, _, m := protowire.ConsumeTag(hb)
				if m < 0 {
					return fr, protowire.ParseError(m)
				}
				s, k := protowire.ConsumeBytes(hb[m:])
				if k < 0 {
					return fr, protowire.ParseError(k)
				}
				hb = hb[m+k:]
				if hn == 1 || hn == 2 {
					h[hn-1] = string(s)
				}
			}
			fr.headers = append(fr.headers, h)
		case 8:
			fr.payload = append([]byte{}, v...)
		}
	}
	return fr, nil
}

var feishuUpgrader = websocket.Upgrader{}

func (f *FeishuApp) serveWS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ok := f.ticket != "" && r.URL.Query().Get("access_key") == f.ticket
	f.mu.Unlock()
	if !ok {
		w.Header().Set("Handshake-Status", "514")
		w.Header().Set("Handshake-Msg", "auth failed")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	conn, err := feishuUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.conn = conn
	f.connects++
	f.notify()
	f.mu.Unlock()
	for {
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		fr, err := decodeFakeFrame(msg)
		if mt != websocket.BinaryMessage || err != nil {
			f.t.Errorf("feishu fake: the client sent a message that is no frame (type %d): %v", mt, err)
			continue
		}
		switch {
		case fr.method == 0 && fr.header("type") == "ping":
			f.mu.Lock()
			f.pings++
			f.notify()
			f.mu.Unlock()
			pong := fakeFrame{service: fr.service, method: 0, headers: [][2]string{{"type", "pong"}},
				payload: []byte(`{"ReconnectCount":-1,"ReconnectInterval":1,"ReconnectNonce":0,"PingInterval":120}`)}
			f.write(conn, pong.encode())
		case fr.method == 1:
			f.response(fr)
		default:
			f.t.Errorf("feishu fake: unexpected frame method %d type %q", fr.method, fr.header("type"))
		}
	}
}

// response records the client's answer to a pushed data frame.
func (f *FeishuApp) response(fr fakeFrame) {
	var p struct {
		Code    int               `json:"code"`
		Headers map[string]string `json:"headers"`
		Data    []byte            `json:"data"`
	}
	if err := json.Unmarshal(fr.payload, &p); err != nil {
		f.t.Errorf("feishu fake: a response payload is not the SDK's JSON: %v: %s", err, fr.payload)
		return
	}
	res := FeishuWSResponse{MessageID: fr.header("message_id"), Code: p.Code, Headers: p.Headers,
		SeqID: fr.seqID, LogID: fr.logID, Service: fr.service, Method: fr.method, BizRt: fr.header("biz_rt")}
	if len(p.Data) > 0 {
		var d struct {
			Toast struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"toast"`
		}
		if err := json.Unmarshal(p.Data, &d); err != nil {
			f.t.Errorf("feishu fake: a response's data is not a callback response: %v", err)
		}
		res.ToastType, res.Toast = d.Toast.Type, d.Toast.Content
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.pushed[res.MessageID]; ok {
		res.Latency = time.Since(at)
	}
	f.responses = append(f.responses, res)
	f.notify()
}

func (f *FeishuApp) write(conn *websocket.Conn, b []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return conn.WriteMessage(websocket.BinaryMessage, b)
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

// WaitConnected waits until the client opened its n-th long connection.
func (f *FeishuApp) WaitConnected(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("long connection %d", n), func() bool { return f.connects >= n })
}

// WaitPings waits until the client pinged n times.
func (f *FeishuApp) WaitPings(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d pings", n), func() bool { return f.pings >= n })
}

// WaitResponses waits until the client answered n data frames, and
// returns the answers.
func (f *FeishuApp) WaitResponses(n int) []FeishuWSResponse {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d answers", n), func() bool { return len(f.responses) >= n })
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FeishuWSResponse{}, f.responses...)
}

// Drop closes the current long connection, as a network failure would.
func (f *FeishuApp) Drop() {
	f.mu.Lock()
	conn := f.conn
	f.conn = nil
	f.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// FeishuClick is one click of a card's button, as card.action.trigger
// carries it.
type FeishuClick struct {
	// OpenID is who clicked; MessageID the card's message.
	OpenID, MessageID string
	// Value is the value of the button's callback behaviour.
	Value map[string]any
	// Parts splits the frame's payload in that many parts (0 or 1: whole).
	Parts int
}

// PushCardAction pushes a click over the current long connection, as the
// callback card.action.trigger (schema 2.0) in a data frame of type
// "event", and returns the event_id and the frame's message_id.
func (f *FeishuApp) PushCardAction(c FeishuClick) (eventID, messageID string) {
	f.t.Helper()
	f.mu.Lock()
	f.pushN++
	n := f.pushN
	conn := f.conn
	f.mu.Unlock()
	if conn == nil {
		f.t.Fatal("feishu fake: no long connection to push on")
	}
	eventID = fmt.Sprintf("ev_click%04d", n)
	messageID = fmt.Sprintf("msg_frame%04d", n)
	payload, _ := json.Marshal(map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": eventID, "token": "v-verification", "create_time": strconv.FormatInt(time.Now().UnixMicro(), 10),
			"event_type": FeishuCardAction, "tenant_key": "tenant1", "app_id": f.appID},
		"event": map[string]any{
			"operator": map[string]any{"tenant_key": "tenant1", "user_id": "u1", "open_id": c.OpenID},
			"token":    "c-cardupdatetoken",
			"action":   map[string]any{"value": c.Value, "tag": "button"},
			"host":     "im_message",
			"context":  map[string]any{"open_message_id": c.MessageID, "open_chat_id": "oc_chat"},
		},
	})
	parts := max(c.Parts, 1)
	size := (len(payload) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		part := payload[min(i*size, len(payload)):min((i+1)*size, len(payload))]
		fr := fakeFrame{seqID: uint64(n), logID: uint64(1000 + n), service: 33, method: 1, payload: part,
			headers: [][2]string{{"type", "event"}, {"message_id", messageID}, {"sum", strconv.Itoa(parts)},
				{"seq", strconv.Itoa(i)}, {"trace_id", "trace" + strconv.Itoa(n)}}}
		if i == parts-1 {
			f.mu.Lock()
			f.pushed[messageID] = time.Now()
			f.mu.Unlock()
		}
		if err := f.write(conn, fr.encode()); err != nil {
			f.t.Logf("feishu fake: push %s part %d: %v", messageID, i, err)
		}
	}
	return eventID, messageID
}
