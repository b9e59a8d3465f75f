package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// MethodConnectionsOpen is the Web API method that hands out Socket Mode
// URLs.
const MethodConnectionsOpen = "apps.connections.open"

// socketPath is where the fake serves its WebSockets, as Slack's URLs
// (wss://wss-….slack.com/link/?ticket=…&app_id=…) do.
const socketPath = "/link/"

// SlackAckWithin is how long Slack waits for the acknowledgement of an
// envelope: Slack's Bolt guides say "you only have 3 seconds to respond
// before Slack registers a timeout error". The fake sends an envelope not
// acknowledged by then again (RedeliverAfter).
const SlackAckWithin = 3 * time.Second

// SlackSocket is Slack's Socket Mode as the fake Slack serves it, from
// Slack's documentation (api.slack.com/apis/socket-mode and
// /methods/apps.connections.open): apps.connections.open, a POST with the
// app-level token as a Bearer Authorization header, answers
// {"ok":true,"url":"ws://…/link/?ticket=…"}; each URL opens one WebSocket,
// once; the WebSocket says hello, then carries envelopes
// ({"envelope_id","type","payload","accepts_response_payload"}) that the
// app acknowledges with {"envelope_id":…}. As Slack does, the fake sends
// an envelope not acknowledged within SlackAckWithin again, on a later
// connection, with retry_attempt and retry_reason, up to three times. The
// test delivers clicks, duplicates and resends them, drops connections or
// asks the app to reconnect (one at a time, or every few seconds with
// EndConnections), and reads what was sent and acknowledged, on which
// connection and when (by the real clock: the 3-second rule is wall
// time).
type SlackSocket struct {
	slack    *Slack
	appToken string
	upgrader websocket.Upgrader

	mu        sync.Mutex
	opens     int
	refused   int
	reused    int
	tickets   map[string]bool
	conns     []*socketConn
	current   *socketConn
	envelopes map[string]*SocketEnvelope
	order     []string
	queue     []string
	seq       int
	pingEvery time.Duration
	// redeliverAfter is how long an envelope waits for its
	// acknowledgement before it is sent again; 0 never.
	redeliverAfter time.Duration
	plan           func(n int) SocketEnd
	done           chan struct{}
}

// SocketEnvelope is one envelope the fake delivered, with every time it
// was sent and acknowledged.
type SocketEnvelope struct {
	ID      string
	Payload json.RawMessage
	Sends   []SocketSend
	Acks    []SocketAck
}

// SocketSend is one sending of an envelope.
type SocketSend struct {
	At time.Time
	// Conn is the connection it went on (1 for the first).
	Conn int
	// RetryAttempt and RetryReason are as sent: 0 and "" the first time.
	RetryAttempt int
	RetryReason  string
	// ConnEnded is when Conn ended, or zero while it is open.
	ConnEnded time.Time
}

// SocketAck is one acknowledgement of an envelope.
type SocketAck struct {
	At   time.Time
	Conn int
}

// SocketConnection is one WebSocket the fake served.
type SocketConnection struct {
	// N is 1 for the first.
	N int
	// Opened is when the fake said hello on it; Ended when it ended, or
	// zero while it is open.
	Opened, Ended time.Time
	// Ending is how the fake ended it: "dropped" (closed without a frame),
	// or the reason of the disconnect frame it sent; "" when the app
	// closed it unasked, or while it is open.
	Ending string
}

// socketConn is one WebSocket the fake serves.
type socketConn struct {
	n       int
	ws      *websocket.Conn
	writeMu sync.Mutex
	opened  time.Time
	ended   time.Time
	ending  string
}

// SocketMode makes the fake Slack serve Socket Mode to the app-level token
// appToken, and returns it. Its connections close when the test ends.
func (s *Slack) SocketMode(t testing.TB, appToken string) *SlackSocket {
	t.Helper()
	sock := &SlackSocket{slack: s, appToken: appToken, tickets: map[string]bool{},
		// Slack's clients dial with an Origin of Slack's own
		// (slack-go: https://api.slack.com), not the fake's host.
		upgrader:  websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		envelopes: map[string]*SocketEnvelope{}, pingEvery: 5 * time.Second, redeliverAfter: SlackAckWithin,
		done: make(chan struct{})}
	s.mu.Lock()
	s.socket = sock
	s.mu.Unlock()
	t.Cleanup(sock.close)
	return sock
}

// SlackClick is a press of a button of a message, as a block_actions
// payload describes it.
type SlackClick struct {
	UserID, UserName string
	Channel          string
	// MessageTS is the ts of the message whose button was pressed.
	MessageTS string
	ActionID  string
	BlockID   string
	Value     string
	Label     string
}

// Click delivers c in an interactive envelope, on the open connection, or
// on the next one when none is open, and returns the envelope's id.
func (k *SlackSocket) Click(c SlackClick) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	id := fmt.Sprintf("env-%04d", k.seq)
	// The payload of a button press in a message (Slack's block_actions
	// reference): user, container, channel, message, actions.
	payload, _ := json.Marshal(map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": c.UserID, "username": c.UserName, "name": c.UserName, "team_id": "T0FAKE"},
		"api_app_id": "A0FAKE",
		"container":  map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.Channel, "is_ephemeral": false},
		"trigger_id": fmt.Sprintf("trigger-%d", k.seq),
		"team":       map[string]any{"id": "T0FAKE", "domain": "fake"},
		"channel":    map[string]any{"id": c.Channel, "name": "alerts"},
		"message":    map[string]any{"type": "message", "ts": c.MessageTS, "text": "alarm"},
		"actions": []map[string]any{{
			"action_id": c.ActionID, "block_id": c.BlockID, "value": c.Value, "type": "button",
			"text":      map[string]any{"type": "plain_text", "text": c.Label},
			"action_ts": fmt.Sprintf("1700000001.%06d", k.seq),
		}},
	})
	k.envelopes[id] = &SocketEnvelope{ID: id, Payload: payload}
	k.order = append(k.order, id)
	k.sendLocked(id, 0, "")
	return id
}

// Opens is how many apps.connections.open calls handed out a URL.
func (k *SlackSocket) Opens() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opens
}

// Refused counts apps.connections.open calls refused for their token, and
// Reused the WebSocket requests with a URL used before.
func (k *SlackSocket) Refused() (refused, reused int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refused, k.reused
}

// Connections is how many WebSockets were opened, and whether one is open
// now (not dropped, not asked to disconnect).
func (k *SlackSocket) Connections() (n int, open bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conns), k.current != nil
}

// ConnectionLog returns every connection served, in order.
func (k *SlackSocket) ConnectionLog() []SocketConnection {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]SocketConnection, len(k.conns))
	for i, c := range k.conns {
		out[i] = SocketConnection{N: c.n, Opened: c.opened, Ended: c.ended, Ending: c.ending}
	}
	return out
}

// Pending is how many envelopes wait for a connection.
func (k *SlackSocket) Pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.queue)
}

// Envelopes returns every envelope delivered, in the order clicked.
func (k *SlackSocket) Envelopes() []SocketEnvelope {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]SocketEnvelope, 0, len(k.order))
	for _, id := range k.order {
		e := *k.envelopes[id]
		e.Sends = append([]SocketSend(nil), e.Sends...)
		for i := range e.Sends {
			e.Sends[i].ConnEnded = k.conns[e.Sends[i].Conn-1].ended
		}
		e.Acks = append([]SocketAck(nil), e.Acks...)
		out = append(out, e)
	}
	return out
}

// serveOpen answers apps.connections.open. Slack's reference: "you will
// need to pass this token in the HTTP Authorization header of your
// request; passing it as a POST parameter will result in an error"; a
// success is {"ok": true, "url": "wss://…/link/?ticket=…&app_id=…"}.
// A failure queued with Slack.Fail(MethodConnectionsOpen, …) is answered
// first.
func (k *SlackSocket) serveOpen(w http.ResponseWriter, r *http.Request) {
	k.slack.mu.Lock()
	f, failed := k.slack.nextFailure(MethodConnectionsOpen)
	k.slack.mu.Unlock()
	if failed {
		writeFailure(w, f)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	auth := r.Header.Get("Authorization")
	k.mu.Lock()
	defer k.mu.Unlock()
	if auth == "" {
		k.refused++
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if auth != "Bearer "+k.appToken {
		k.refused++
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	k.opens++
	ticket := fmt.Sprintf("ticket-%d-%d", k.opens, time.Now().UnixNano())
	k.tickets[ticket] = true
	url := "ws" + strings.TrimPrefix(k.slack.server.URL, "http") + socketPath + "?ticket=" + ticket + "&app_id=A0FAKE"
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": url})
}

// serveLink opens a WebSocket for a ticket not used before, says hello,
// sends what waited for a connection, and records acknowledgements.
func (k *SlackSocket) serveLink(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	k.mu.Lock()
	ok := k.tickets[ticket]
	delete(k.tickets, ticket)
	if !ok {
		k.reused++
	}
	k.mu.Unlock()
	if !ok {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	ws, err := k.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	k.mu.Lock()
	c := &socketConn{n: len(k.conns) + 1, ws: ws}
	k.conns = append(k.conns, c)
	_ = c.write(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": "A0FAKE"}})
	c.opened = time.Now()
	k.current = c
	queue := k.queue
	k.queue = nil
	for _, id := range queue {
		e := k.envelopes[id]
		reason := ""
		if len(e.Sends) > 0 {
			reason = retryTimeout
		}
		k.sendLocked(id, nextAttempt(e), reason)
	}
	plan := k.plan
	k.mu.Unlock()
	if plan != nil {
		if end := plan(c.n); end.After > 0 {
			time.AfterFunc(end.After, func() {
				if end.Reason == "" {
					k.drop(c)
				} else {
					k.disconnect(c, end.Reason)
				}
			})
		}
	}

	go k.ping(c)
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			break
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(msg, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		k.mu.Lock()
		if e, ok := k.envelopes[ack.EnvelopeID]; ok {
			e.Acks = append(e.Acks, SocketAck{At: time.Now(), Conn: c.n})
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	k.endLocked(c)
	k.mu.Unlock()
	_ = ws.Close()
}

// ping sends WebSocket pings, as Slack does, until c ends: socketmode
// takes a connection without pings for dead.
func (k *SlackSocket) ping(c *socketConn) {
	t := time.NewTicker(k.pingEvery)
	defer t.Stop()
	for {
		if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-k.done:
			return
		}
	}
}

// sendLocked sends envelope id on the open connection, or queues it; k.mu
// must be held.
func (k *SlackSocket) sendLocked(id string, attempt int, reason string) {
	c := k.current
	if c == nil {
		k.queue = append(k.queue, id)
		return
	}
	e := k.envelopes[id]
	frame := map[string]any{"envelope_id": id, "type": "interactive", "payload": e.Payload,
		"accepts_response_payload": false}
	if attempt > 0 {
		frame["retry_attempt"], frame["retry_reason"] = attempt, reason
	}
	e.Sends = append(e.Sends, SocketSend{At: time.Now(), Conn: c.n, RetryAttempt: attempt, RetryReason: reason})
	if err := c.write(frame); err != nil {
		k.endLocked(c)
		e.Sends = e.Sends[:len(e.Sends)-1]
		k.queue = append(k.queue, id)
		return
	}
	if k.redeliverAfter > 0 {
		n := len(e.Sends) - 1
		time.AfterFunc(k.redeliverAfter, func() { k.overdue(id, n) })
	}
}

// queued reports whether envelope id waits for a connection; k.mu must be
// held.
func (k *SlackSocket) queued(id string) bool {
	for _, q := range k.queue {
		if q == id {
			return true
		}
	}
	return false
}

// endLocked records that c ended; k.mu must be held.
func (k *SlackSocket) endLocked(c *socketConn) {
	if c == nil {
		return
	}
	if c.ended.IsZero() {
		c.ended = time.Now()
	}
	if k.current == c {
		k.current = nil
	}
}

func (c *socketConn) write(v any) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

// closed reports whether the test ended.
func (k *SlackSocket) closed() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// close ends every connection, at the end of the test.
func (k *SlackSocket) close() {
	k.mu.Lock()
	select {
	case <-k.done:
	default:
		close(k.done)
	}
	conns := append([]*socketConn(nil), k.conns...)
	k.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.NetConn().Close()
	}
}
