package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// The long connection (Feishu's "long connection mode" of event and
// callback subscription), as the SDK's ws package speaks it: POST
// EndpointPath with the app's credentials returns a WebSocket URL and the
// client's settings; over the WebSocket, binary messages are frames (see
// frame). The client pings every PingInterval; Feishu pushes data frames
// (events and callbacks, split into parts when large) and the client
// answers each with the frame it got, its payload replaced by a response.
// A card's button click is the callback card.action.trigger, pushed as a
// data frame of type "event" (the SDK dispatches it with the events;
// frames of type "card" it drops, and so does Listen).

// Endpoint answers (the SDK's ws/const.go): 0 OK; 1 system busy and
// 1000040343 internal error are worth retrying; any other code is the
// client's fault (the app's credentials), which no retry cures.
const (
	endpointBusy     = 1
	endpointInternal = 1000040343
	// The handshake's refusals, in its Handshake-Status header: 403 the
	// app is forbidden; 514 authentication failed, final when
	// Handshake-Autherrcode says too many connections (1000040350).
	handshakeForbidden  = 403
	handshakeAuthFailed = 514
	handshakeConnLimit  = 1000040350
)

// Defaults of the client's settings until Feishu sends its own (the SDK's
// NewClient).
const (
	defaultPing      = 2 * time.Minute
	defaultReconnect = 2 * time.Minute
	// reassembleFor is how long the parts of a message wait for the rest.
	reassembleFor = 5 * time.Second
	// CallbackType is the callback of a card's button click.
	CallbackType = "card.action.trigger"
)

// clientConfig is what Feishu tells the client (ws/model.go ClientConfig),
// intervals in seconds.
type clientConfig struct {
	ReconnectCount    int `json:"ReconnectCount"`
	ReconnectInterval int `json:"ReconnectInterval"`
	ReconnectNonce    int `json:"ReconnectNonce"`
	PingInterval      int `json:"PingInterval"`
}

// fatalError is an error reconnecting cannot cure.
type fatalError struct{ error }

func (e fatalError) Unwrap() error { return e.error }

// ListenKey names the app's long connection: the sinks of one app share it.
func (s *AppSink) ListenKey() string { return "feishu-app:" + s.o.AppID }

// Listen holds the app's long connection until ctx ends and hands every
// click of a relay button to acts, answering Feishu within its 3 seconds
// with a toast of the result. It reconnects after a failure, waiting a
// capped exponential backoff with jitter (capped by Feishu's
// ReconnectInterval, the first wait lengthened by up to its
// ReconnectNonce); it returns an error only when Feishu refuses the app's
// credentials, or the app, which reconnecting cannot cure.
func (s *AppSink) Listen(ctx context.Context, acts notify.Actions) error {
	l := &listener{s: s, acts: acts, cfg: clientConfig{PingInterval: int(defaultPing / time.Second), ReconnectInterval: int(defaultReconnect / time.Second)}}
	attempt := 0
	for {
		connected, err := l.once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if fe, ok := errors.AsType[fatalError](err); ok {
			return s.secrets.Error(fe.error)
		}
		if connected {
			attempt = 0
		}
		wait := l.backoff(attempt)
		attempt++
		s.logger.Warn("feishu long connection lost, reconnecting", "sink", s.name,
			"error", s.secrets.String(fmt.Sprint(err)), "wait", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// listener is one Listen.
type listener struct {
	s    *AppSink
	acts notify.Actions

	mu    sync.Mutex // guards cfg and parts
	cfg   clientConfig
	parts map[string]*partial

	wmu sync.Mutex // one writer at a time
}

// partial is a message whose parts are arriving.
type partial struct {
	parts [][]byte
	since time.Time
}

// backoff is the wait before reconnect attempt n (from 0): minBackoff
// doubled n times, capped by ReconnectInterval, half of it random; the
// first adds up to ReconnectNonce seconds, as the SDK does.
func (l *listener) backoff(n int) time.Duration {
	l.mu.Lock()
	cfg := l.cfg
	l.mu.Unlock()
	limit := time.Duration(cfg.ReconnectInterval) * time.Second
	if limit <= 0 {
		limit = defaultReconnect
	}
	d := l.s.minBackoff
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	d = d/2 + rand.N(d/2+1)
	if n == 0 && cfg.ReconnectNonce > 0 {
		d += rand.N(time.Duration(cfg.ReconnectNonce) * time.Second)
	}
	return d
}

// once asks for an endpoint, connects and serves the connection until it
// fails or ctx ends; connected says the WebSocket was open.
//
// The URL is dialed as Feishu answered it: its query (fpid, aid,
// device_id, access_key, service_id, ticket) is the endpoint's to give and
// the same in every answer but for the connection's own values, so none of
// it joins the redaction set, which holds secrets only. The URL is never
// written to a log or an error instead.
func (l *listener) once(ctx context.Context) (connected bool, err error) {
	wsURL, err := l.endpoint(ctx)
	if err != nil {
		return false, err
	}
	u, err := url.Parse(wsURL)
	if err != nil {
		return false, errors.New("Feishu's endpoint answered a URL that does not parse")
	}
	service, _ := strconv.ParseInt(u.Query().Get("service_id"), 10, 32)
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := dialer.DialContext(ctx, wsURL, nil)
	if err != nil {
		if resp != nil {
			return false, handshakeErr(l.s, resp)
		}
		return false, fmt.Errorf("opening the long connection: %w", err)
	}
	l.s.logger.Info("feishu long connection open", "sink", l.s.name)
	return true, l.serve(ctx, conn, int32(service))
}

// handshakeErr words a refused WebSocket handshake.
func handshakeErr(s *AppSink, resp *http.Response) error {
	code, _ := strconv.Atoi(resp.Header.Get("Handshake-Status"))
	msg := s.quote(resp.Header.Get("Handshake-Msg"))
	auth, _ := strconv.Atoi(resp.Header.Get("Handshake-Autherrcode"))
	switch {
	case code == handshakeForbidden:
		return fatalError{fmt.Errorf("%s: Feishu forbids the app's long connection (%d: %s): check the app's status in the developer console", s.prefix, code, msg)}
	case code == handshakeAuthFailed && auth == handshakeConnLimit:
		return fatalError{fmt.Errorf("%s: the app has too many long connections open (%d: %s): stop the other clients of the app", s.prefix, code, msg)}
	}
	return fmt.Errorf("the long connection's handshake failed: HTTP %d, status %d (%s)", resp.StatusCode, code, msg)
}

// endpoint asks Feishu for the WebSocket URL and the client's settings.
func (l *listener) endpoint(ctx context.Context) (string, error) {
	s := l.s
	what := s.prefix + ": long connection endpoint"
	body, _ := json.Marshal(map[string]string{"AppID": s.o.AppID, "AppSecret": s.o.AppSecret})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.o.APIURL+EndpointPath, bytes.NewReader(body))
	if err != nil {
		return "", fatalError{fmt.Errorf("%s: cannot build the request: check api_url", what)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("locale", "zh")
	answer, _, err := notify.Post(s.http, req, s.clock.Now, what, s.secrets)
	if err != nil {
		return "", err
	}
	var ans struct {
		Code *int   `json:"code"`
		Msg  string `json:"msg"`
		Data *struct {
			URL          string        `json:"URL"`
			ClientConfig *clientConfig `json:"ClientConfig"`
		} `json:"data"`
	}
	if json.Unmarshal(answer, &ans) != nil || ans.Code == nil {
		return "", fmt.Errorf("%s: the answer is not the open platform's JSON: check api_url", what)
	}
	switch *ans.Code {
	case codeOK:
	case endpointBusy, endpointInternal:
		return "", fmt.Errorf("%s: Feishu is busy (code %d: %s)", what, *ans.Code, s.quote(ans.Msg))
	default:
		return "", fatalError{fmt.Errorf("%s: Feishu refused the app's long connection (code %d: %s): check that %s and %s hold the App ID and App Secret of the app, and that its callbacks are subscribed through the long connection",
			what, *ans.Code, s.quote(ans.Msg), s.o.AppIDEnv, s.o.AppSecretEnv)}
	}
	if ans.Data == nil || ans.Data.URL == "" {
		return "", fmt.Errorf("%s: Feishu answered no URL", what)
	}
	if ans.Data.ClientConfig != nil {
		l.configure(*ans.Data.ClientConfig)
	}
	return ans.Data.URL, nil
}

// configure takes Feishu's settings, keeping the defaults of those it
// leaves out.
func (l *listener) configure(c clientConfig) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.ReconnectCount = c.ReconnectCount
	l.cfg.ReconnectNonce = c.ReconnectNonce
	if c.ReconnectInterval > 0 {
		l.cfg.ReconnectInterval = c.ReconnectInterval
	}
	if c.PingInterval > 0 {
		l.cfg.PingInterval = c.PingInterval
	}
}

// serve reads the connection until it fails or ctx ends, pinging it, and
// answers each data frame from a goroutine of its own.
func (l *listener) serve(outer context.Context, conn *websocket.Conn, service int32) error {
	ctx, cancel := context.WithCancel(outer)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = conn.Close()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.pings(ctx, conn, service)
	}()
	go func() {
		<-ctx.Done()
		_ = conn.Close()
	}()
	for {
		mt, msg, err := conn.ReadMessage()
		if err != nil {
			return fmt.Errorf("reading the long connection: %w", err)
		}
		if mt != websocket.BinaryMessage {
			continue
		}
		f, err := unmarshalFrame(msg)
		if err != nil {
			l.s.logger.Warn("feishu long connection: a message is no frame", "sink", l.s.name, "error", err.Error())
			continue
		}
		switch f.Method {
		case methodControl:
			l.control(f)
		case methodData:
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A click in hand is applied even if the connection
				// drops meanwhile: only Listen's end cancels it.
				l.data(outer, conn, f)
			}()
		}
	}
}

// pings sends a ping now and every PingInterval.
func (l *listener) pings(ctx context.Context, conn *websocket.Conn, service int32) {
	for {
		ping := frame{Service: service, Method: methodControl, Headers: []frameHeader{{hType, typePing}}}
		if err := l.write(conn, ping.marshal()); err != nil {
			return
		}
		l.mu.Lock()
		every := time.Duration(l.cfg.PingInterval) * time.Second
		l.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// control takes a pong, whose payload may carry new settings.
func (l *listener) control(f frame) {
	if f.header(hType) != typePong || len(f.Payload) == 0 {
		return
	}
	var c clientConfig
	if json.Unmarshal(f.Payload, &c) == nil {
		l.configure(c)
	}
}

func (l *listener) write(conn *websocket.Conn, b []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return conn.WriteMessage(websocket.BinaryMessage, b)
}

// data handles one data frame: it reassembles a message sent in parts,
// hands a click to Act, and answers with the frame, its payload the
// response, as the SDK does.
func (l *listener) data(ctx context.Context, conn *websocket.Conn, f frame) {
	started := time.Now()
	payload := f.Payload
	if sum, _ := strconv.Atoi(f.header(hSum)); sum > 1 {
		seq, _ := strconv.Atoi(f.header(hSeq))
		if payload = l.combine(f.header(hMessageID), sum, seq, payload); payload == nil {
			return
		}
	}
	if f.header(hType) != typeEvent {
		return
	}
	var data []byte
	if rsp := l.callback(ctx, payload); rsp != nil {
		data, _ = json.Marshal(rsp)
	}
	f.Headers = append(f.Headers, frameHeader{hBizRt, strconv.FormatInt(time.Since(started).Milliseconds(), 10)})
	f.Payload, _ = json.Marshal(struct {
		Code    int               `json:"code"`
		Headers map[string]string `json:"headers"`
		Data    []byte            `json:"data"`
	}{http.StatusOK, nil, data})
	if err := l.write(conn, f.marshal()); err != nil {
		l.s.logger.Warn("feishu long connection: could not answer a callback", "sink", l.s.name,
			"message_id", f.header(hMessageID), "error", l.s.secrets.String(err.Error()))
	}
}

// combine keeps part seq of sum of message id, and returns the whole
// payload once every part arrived (nil before).
func (l *listener) combine(id string, sum, seq int, b []byte) []byte {
	if seq < 0 || seq >= sum || sum > 64 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parts == nil {
		l.parts = map[string]*partial{}
	}
	now := time.Now()
	for k, p := range l.parts {
		if now.Sub(p.since) > reassembleFor {
			delete(l.parts, k)
		}
	}
	p := l.parts[id]
	if p == nil || len(p.parts) != sum {
		p = &partial{parts: make([][]byte, sum), since: now}
		l.parts[id] = p
	}
	p.parts[seq] = b
	var whole []byte
	for _, part := range p.parts {
		if len(part) == 0 {
			return nil
		}
		whole = append(whole, part...)
	}
	delete(l.parts, id)
	return whole
}

// cardAction is the callback card.action.trigger (schema 2.0), as much of
// it as relay reads.
type cardAction struct {
	Header struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
	} `json:"header"`
	Event struct {
		Operator struct {
			OpenID string `json:"open_id"`
		} `json:"operator"`
		Action struct {
			Tag   string         `json:"tag"`
			Value map[string]any `json:"value"`
		} `json:"action"`
	} `json:"event"`
}

// callbackResponse is the answer to card.action.trigger: a toast.
type callbackResponse struct {
	Toast *toast `json:"toast,omitempty"`
}

type toast struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// callback hands a click of a relay button to Act and returns the toast
// the clicker sees; nil for an event that is no such click.
func (l *listener) callback(ctx context.Context, payload []byte) *callbackResponse {
	var ev cardAction
	if json.Unmarshal(payload, &ev) != nil || ev.Header.EventType != CallbackType {
		return nil
	}
	str := func(k string) string { s, _ := ev.Event.Action.Value[k].(string); return s }
	a := notify.Action{
		Kind: notify.ActionKind(str(valueRelay)), Sink: str(valueSink), Alarms: []string{str(valueAlarm)},
		Actor: notify.Actor{Via: "feishu", ID: ev.Event.Operator.OpenID}, Ref: ev.Header.EventID,
	}
	if a.Sink == "" {
		a.Sink = l.s.name
	}
	switch {
	case a.Kind != notify.Acknowledge && a.Kind != notify.Shelve && a.Kind != notify.Unacknowledge:
		return nil // not relay's button
	case a.Alarms[0] == "" || a.Actor.ID == "":
		return &callbackResponse{Toast: &toast{Type: "error", Content: "relay could not read this button"}}
	}
	if f := str(valueFor); f != "" && a.Kind == notify.Shelve {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return &callbackResponse{Toast: &toast{Type: "error", Content: "relay could not read this button"}}
		}
		a.ShelveFor = d
	}
	actx, cancel := context.WithTimeout(ctx, l.s.actTimeout)
	defer cancel()
	res, err := l.acts.Act(actx, a)
	switch {
	case err != nil:
		l.s.logger.Error("feishu: a click could not be applied", "sink", a.Sink, "ref", a.Ref, "kind", string(a.Kind),
			"alarm", a.Alarms[0], "error", l.s.secrets.String(err.Error()))
		return &callbackResponse{Toast: &toast{Type: "error", Content: "relay could not apply this now; try again in a moment"}}
	case res.NotAllowed:
		return &callbackResponse{Toast: &toast{Type: "error", Content: sinktype.FirstNonEmpty(res.Text, "you may not act on this alarm")}}
	case len(res.Applied) == 0:
		return &callbackResponse{Toast: &toast{Type: "info", Content: sinktype.FirstNonEmpty(res.Text, "nothing changed")}}
	}
	return &callbackResponse{Toast: &toast{Type: "success", Content: sinktype.FirstNonEmpty(res.Text, "done")}}
}
