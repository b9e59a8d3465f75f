package notifytest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"
)

// The long connection of the fake open platform, as the SDK's ws client
// meets Feishu (larksuite/oapi-sdk-go, ws/client.go): the endpoint hands
// out a URL whose query the client dials verbatim, and the same
// service_id, which the client's pings carry. A URL Feishu answers looks
// like
//
//	wss://<host>/ws/v2?fpid=493&aid=552564&device_id=<19 digits>&access_key=<32 hex digits>&service_id=33554678&ticket=<a UUID>
//
// fpid, aid and service_id are the same in every answer; device_id (the
// SDK's conn_id), access_key and ticket are the fake's per answer.
//
// A card action is a callback, which Feishu pushes once: "回调是同步操作，
// 不提供补推机制，超时未响应即认为这次回调失败，前端会展示报错" (a callback
// is synchronous and never pushed again: unanswered in time, it failed,
// and the person sees an error), unlike an event, which "如开发者未响应，则
// 平台会补推送" (is pushed again when unanswered), from Feishu's callback
// overview. So a click pushed on a connection that ends before its answer,
// or made while no connection is open, is the person's to repeat: the fake
// keeps nothing for the next connection. Duplicate is the bad day when the
// same callback comes twice anyway.
const (
	// FeishuServiceID is the service_id of every endpoint answer, which the
	// client's pings carry and every data frame the fake pushes.
	FeishuServiceID = 33554678
	feishuFPID      = "493"
	feishuAID       = "552564"
	feishuAppWSPath = "/ws/v2"
	// feishuAuthFailed is the handshake's refusal of a URL the endpoint
	// did not hand out: Handshake-Status 514 (the SDK's AuthFailed), which
	// the client takes as worth retrying.
	feishuAuthFailed = "514"
)

// FeishuDial is one WebSocket handshake the fake's long connection got.
type FeishuDial struct {
	// Query is the URL's query as the client dialed it; Want the query of
	// the URL the endpoint last handed out.
	Query, Want string
	// Accepted says the query was one the endpoint handed out, verbatim:
	// a dial of anything else is refused.
	Accepted bool
	// Conn is the connection's number, from 1, when accepted; Opened and
	// Ended when it opened and ended (zero: open still), in real time.
	Conn          int
	Opened, Ended time.Time
}

// FeishuPush is one data frame the fake pushed over a long connection: a
// card action, and what became of it there.
type FeishuPush struct {
	// EventID is the card action's event_id, the same on a redelivery;
	// MessageID the frame's own message_id.
	EventID, MessageID string
	// Conn is the connection it was pushed on, from 1.
	Conn int
	// Duplicate says the event was pushed before.
	Duplicate bool
	// Sent is when its last part was written, Answered when the client's
	// answer came back on the same connection (zero: none), in real time.
	Sent, Answered time.Time
}

// FeishuWSResponse is one answer the client sent over the long connection
// to a data frame the fake pushed.
type FeishuWSResponse struct {
	MessageID string
	// EventID is the card action answered; Conn the connection the
	// answer came on.
	EventID string
	Conn    int
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

// feishuLong is the state of the long connection, guarded by FeishuApp.mu.
type feishuLong struct {
	seed      string
	issued    []string // the queries of the URLs handed out
	keys      []string // their access_key and ticket values
	dials     []FeishuDial
	conn      *websocket.Conn
	connN     int // the current connection's number, 0 when none
	connects  int
	endEvery  time.Duration
	pings     int
	eventN    int
	pushN     int
	pushes    []*FeishuPush
	events    map[string]*feishuEvent
	responses []FeishuWSResponse
}

// feishuEvent is a card action the fake pushed.
type feishuEvent struct {
	payload []byte
	parts   int
}

// serveEndpoint answers POST /callback/ws/endpoint.
func (f *FeishuApp) serveEndpoint(w http.ResponseWriter, r *http.Request) {
	var req struct{ AppID, AppSecret string }
	_ = json.Unmarshal(readBody(r), &req)
	if req.AppID != f.appID || req.AppSecret != f.secret {
		feishuAnswer(w, http.StatusOK, map[string]any{"code": FeishuEndpointRefused, "msg": "invalid app_id or app_secret"})
		return
	}
	f.mu.Lock()
	n := len(f.ws.issued) + 1
	sum := sha256.Sum256([]byte(f.ws.seed + strconv.Itoa(n)))
	key, t := hex.EncodeToString(sum[:16]), hex.EncodeToString(sum[16:])
	ticket := t[:8] + "-" + t[8:12] + "-" + t[12:16] + "-" + t[16:20] + "-" + t[20:]
	query := "fpid=" + feishuFPID + "&aid=" + feishuAID + "&device_id=" + strconv.Itoa(7631867954884938700+n) +
		"&access_key=" + key + "&service_id=" + strconv.Itoa(FeishuServiceID) + "&ticket=" + ticket
	f.ws.issued = append(f.ws.issued, query)
	f.ws.keys = append(f.ws.keys, key, ticket)
	f.mu.Unlock()
	u := "ws" + strings.TrimPrefix(f.server.URL, "http") + feishuAppWSPath + "?" + query
	feishuAnswer(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "data": map[string]any{
		"URL": u, "ClientConfig": map[string]any{"ReconnectCount": -1, "ReconnectInterval": 1, "ReconnectNonce": 0, "PingInterval": 120}}})
}

// ConnectionKeys returns the access_key and ticket of every URL the
// endpoint handed out: the connection's credentials, which the client
// dials and never writes to a log.
func (f *FeishuApp) ConnectionKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ws.keys)
}

// Dials returns the WebSocket handshakes so far.
func (f *FeishuApp) Dials() []FeishuDial {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ws.dials)
}

// Pushes returns the data frames pushed so far, in order.
func (f *FeishuApp) Pushes() []FeishuPush {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FeishuPush, len(f.ws.pushes))
	for i, p := range f.ws.pushes {
		out[i] = *p
	}
	return out
}

// EndEvery makes the fake end each long connection d after it opened (0:
// never), abruptly, as a network failure or a restart on Feishu's side
// does.
func (f *FeishuApp) EndEvery(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ws.endEvery = d
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

// serveWS takes a dial of the long connection: a URL the endpoint handed
// out, verbatim, or a refusal.
func (f *FeishuApp) serveWS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	dial := FeishuDial{Query: r.URL.RawQuery, Accepted: slices.Contains(f.ws.issued, r.URL.RawQuery)}
	if n := len(f.ws.issued); n > 0 {
		dial.Want = f.ws.issued[n-1]
	}
	if !dial.Accepted {
		f.ws.dials = append(f.ws.dials, dial)
		f.notify()
	}
	f.mu.Unlock()
	if !dial.Accepted {
		w.Header().Set("Handshake-Status", feishuAuthFailed)
		w.Header().Set("Handshake-Msg", "auth failed")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	conn, err := feishuUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.ws.connects++
	n := f.ws.connects
	dial.Conn, dial.Opened = n, time.Now()
	f.ws.dials = append(f.ws.dials, dial)
	f.ws.conn, f.ws.connN = conn, n
	end := f.ws.endEvery
	f.notify()
	f.mu.Unlock()
	if end > 0 {
		timer := time.AfterFunc(end, func() { _ = conn.Close() })
		defer timer.Stop()
	}
	defer func() {
		_ = conn.Close()
		f.ended(conn, n)
	}()
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
			if fr.service != FeishuServiceID {
				f.t.Errorf("feishu fake: a ping of service %d on a connection of service_id %d (the SDK's NewPingFrame takes the URL's)", fr.service, FeishuServiceID)
			}
			f.mu.Lock()
			f.ws.pings++
			f.notify()
			f.mu.Unlock()
			pong := fakeFrame{service: fr.service, method: 0, headers: [][2]string{{"type", "pong"}},
				payload: []byte(`{"ReconnectCount":-1,"ReconnectInterval":1,"ReconnectNonce":0,"PingInterval":120}`)}
			_ = f.write(conn, pong.encode())
		case fr.method == 1:
			f.response(n, fr)
		default:
			f.t.Errorf("feishu fake: unexpected frame method %d type %q", fr.method, fr.header("type"))
		}
	}
}

// ended takes connection n out of service; what was pushed on it and not
// answered failed.
func (f *FeishuApp) ended(conn *websocket.Conn, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ws.conn == conn {
		f.ws.conn, f.ws.connN = nil, 0
	}
	for i := range f.ws.dials {
		if f.ws.dials[i].Conn == n {
			f.ws.dials[i].Ended = time.Now()
		}
	}
	f.notify()
}

// connEnded reports whether connection n ended; f.mu is held.
func (f *FeishuApp) connEnded(n int) bool {
	for _, d := range f.ws.dials {
		if d.Conn == n {
			return !d.Ended.IsZero()
		}
	}
	return false
}

// response records the client's answer, on connection n, to a pushed data
// frame.
func (f *FeishuApp) response(n int, fr fakeFrame) {
	var p struct {
		Code    int               `json:"code"`
		Headers map[string]string `json:"headers"`
		Data    []byte            `json:"data"`
	}
	if err := json.Unmarshal(fr.payload, &p); err != nil {
		f.t.Errorf("feishu fake: a response payload is not the SDK's JSON: %v: %s", err, fr.payload)
		return
	}
	res := FeishuWSResponse{MessageID: fr.header("message_id"), Conn: n, Code: p.Code, Headers: p.Headers,
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
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.ws.pushes {
		if p.MessageID == res.MessageID && p.Conn == n {
			p.Answered, res.EventID, res.Latency = now, p.EventID, now.Sub(p.Sent)
		}
	}
	f.ws.responses = append(f.ws.responses, res)
	f.notify()
}

func (f *FeishuApp) write(conn *websocket.Conn, b []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return conn.WriteMessage(websocket.BinaryMessage, b)
}

// WaitConnected waits until the client opened its n-th long connection.
func (f *FeishuApp) WaitConnected(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("long connection %d", n), func() bool { return f.ws.connects >= n })
}

// WaitDials waits until the client dialed the long connection n times,
// and returns the dials.
func (f *FeishuApp) WaitDials(n int) []FeishuDial {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d dials", n), func() bool { return len(f.ws.dials) >= n })
	return f.Dials()
}

// WaitPings waits until the client pinged n times.
func (f *FeishuApp) WaitPings(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d pings", n), func() bool { return f.ws.pings >= n })
}

// WaitResponses waits until the client answered n data frames, and
// returns the answers.
func (f *FeishuApp) WaitResponses(n int) []FeishuWSResponse {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d answers", n), func() bool { return len(f.ws.responses) >= n })
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ws.responses)
}

// WaitSettled waits until every frame pushed so far was answered, or its
// connection ended.
func (f *FeishuApp) WaitSettled() {
	f.t.Helper()
	f.waitFor("an answer to every frame on a connection still open", func() bool {
		for _, p := range f.ws.pushes {
			if p.Answered.IsZero() && !f.connEnded(p.Conn) {
				return false
			}
		}
		return true
	})
}

// Drop closes the current long connection, as a network failure would.
func (f *FeishuApp) Drop() {
	f.mu.Lock()
	conn := f.ws.conn
	f.ws.conn, f.ws.connN = nil, 0
	f.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// PushCardAction pushes a click over the current long connection, as the
// callback card.action.trigger (schema 2.0) in a data frame of type
// "event", and returns the event_id and the frame's message_id. Without a
// connection open, the click fails, as Feishu's callback does, and
// messageID is empty.
func (f *FeishuApp) PushCardAction(c FeishuClick) (eventID, messageID string) {
	f.mu.Lock()
	f.ws.eventN++
	eventID = fmt.Sprintf("ev_click%04d", f.ws.eventN)
	f.mu.Unlock()
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
	f.mu.Lock()
	f.ws.events[eventID] = &feishuEvent{payload: payload, parts: max(c.Parts, 1)}
	f.mu.Unlock()
	return eventID, f.push(eventID, false)
}

// Duplicate pushes the card action eventID again, in a frame of its own, on
// the current connection, and returns the frame's message_id (empty when
// none is open). Feishu documents no second push of a callback; this is
// the bad day when one comes twice all the same.
func (f *FeishuApp) Duplicate(eventID string) string {
	f.t.Helper()
	f.mu.Lock()
	_, ok := f.ws.events[eventID]
	f.mu.Unlock()
	if !ok {
		f.t.Fatalf("feishu fake: no card action %s to push again", eventID)
	}
	return f.push(eventID, true)
}

// push writes event id, in its parts, on the current connection, and
// returns the frame's message_id ("" when no connection is open).
func (f *FeishuApp) push(id string, again bool) string {
	f.mu.Lock()
	conn, n, ev := f.ws.conn, f.ws.connN, f.ws.events[id]
	if conn == nil {
		f.mu.Unlock()
		return ""
	}
	f.ws.pushN++
	k := f.ws.pushN
	p := &FeishuPush{EventID: id, MessageID: fmt.Sprintf("msg_frame%04d", k), Conn: n, Duplicate: again}
	f.ws.pushes = append(f.ws.pushes, p)
	f.mu.Unlock()
	size := (len(ev.payload) + ev.parts - 1) / ev.parts
	for i := 0; i < ev.parts; i++ {
		part := ev.payload[min(i*size, len(ev.payload)):min((i+1)*size, len(ev.payload))]
		fr := fakeFrame{seqID: uint64(k), logID: uint64(1000 + k), service: FeishuServiceID, method: 1, payload: part,
			headers: [][2]string{{"type", "event"}, {"message_id", p.MessageID}, {"sum", strconv.Itoa(ev.parts)},
				{"seq", strconv.Itoa(i)}, {"trace_id", "trace" + strconv.Itoa(k)}}}
		if i == ev.parts-1 {
			f.mu.Lock()
			p.Sent = time.Now()
			f.mu.Unlock()
		}
		if err := f.write(conn, fr.encode()); err != nil {
			break // the connection ended: the click failed
		}
	}
	return p.MessageID
}
