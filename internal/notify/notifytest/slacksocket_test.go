package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relay-energy/relay/internal/testwait"
)

const (
	socketTestBotToken = "xoxb-socket-self-test"
	socketTestAppToken = "xapp-1-A0FAKE-socket-self-test"
)

// socketFrame is what the fake sends on a Socket Mode connection.
type socketFrame struct {
	Type         string `json:"type"`
	Reason       string `json:"reason"`
	EnvelopeID   string `json:"envelope_id"`
	RetryAttempt *int   `json:"retry_attempt"`
	RetryReason  string `json:"retry_reason"`
}

// openSocket does what an app does: apps.connections.open with the
// app-level token, then the WebSocket of the URL it answers, whose first
// frame must be hello.
func openSocket(t *testing.T, s *Slack) *websocket.Conn {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.APIURL()+MethodConnectionsOpen, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+socketTestAppToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		OK  bool   `json:"ok"`
		URL string `json:"url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || !ans.OK {
		t.Fatalf("apps.connections.open: %+v, %v", ans, err)
	}
	ws, _, err := websocket.DefaultDialer.Dial(ans.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	if f := readFrame(t, ws); f.Type != "hello" {
		t.Fatalf("first frame %+v, want hello", f)
	}
	return ws
}

// readFrame reads the next frame of ws, failing t when none comes within
// 5 s or the connection ends.
func readFrame(t *testing.T, ws *websocket.Conn) socketFrame {
	t.Helper()
	f, err := nextFrame(ws)
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return f
}

func nextFrame(ws *websocket.Conn) (socketFrame, error) {
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var f socketFrame
	_, msg, err := ws.ReadMessage()
	if err != nil {
		return f, err
	}
	return f, json.Unmarshal(msg, &f)
}

// TestSocketFakeEndsConnectionsAndRedeliversAsSlackDoes: the fake ends
// each connection as planned (closed without a frame, or a disconnect
// frame with Slack's reasons refresh_requested and warning), sends a
// duplicate as it was sent, and sends an envelope not acknowledged in time
// again on a later connection with retry_attempt 1 and retry_reason
// "timeout", then no more once acknowledged. It records every sending and
// acknowledgement with its connection.
func TestSocketFakeEndsConnectionsAndRedeliversAsSlackDoes(t *testing.T) {
	s := NewSlack(t, socketTestBotToken)
	k := s.SocketMode(t, socketTestAppToken)
	k.RedeliverAfter(200 * time.Millisecond)
	ends := map[int]SocketEnd{1: {After: 300 * time.Millisecond}, 2: {After: 300 * time.Millisecond, Reason: "refresh_requested"},
		3: {After: 300 * time.Millisecond, Reason: "warning"}}
	k.EndConnections(func(n int) SocketEnd { return ends[n] })

	first := openSocket(t, s)
	id := k.Click(SlackClick{UserID: "U1", Channel: "C1", ActionID: "relay.ack", BlockID: "relay/x", Value: "a1"})
	if f := readFrame(t, first); f.EnvelopeID != id || f.Type != "interactive" || f.RetryAttempt != nil {
		t.Fatalf("first sending %+v, want %s without retry fields", f, id)
	}
	if !k.Duplicate(id) {
		t.Fatal("Duplicate found no open connection")
	}
	if f := readFrame(t, first); f.EnvelopeID != id || f.RetryAttempt != nil {
		t.Fatalf("duplicate %+v, want %s as first sent", f, id)
	}
	// Not acknowledged: the fake sends it again on a later connection, not
	// on this one, which it then closes without a frame.
	// (1006, abnormal closure, is what a WebSocket reports when no close
	// frame came.)
	if f, err := nextFrame(first); !websocket.IsCloseError(err, websocket.CloseAbnormalClosure) {
		t.Fatalf("connection 1 read %+v, %v; want it closed without a frame", f, err)
	}

	second := openSocket(t, s)
	f := readFrame(t, second)
	if f.EnvelopeID != id || f.RetryAttempt == nil || *f.RetryAttempt != 1 || f.RetryReason != "timeout" {
		t.Fatalf("redelivery %+v, want %s with retry_attempt 1 and retry_reason timeout", f, id)
	}
	if err := second.WriteJSON(map[string]string{"envelope_id": id}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, second); f.Type != "disconnect" || f.Reason != "refresh_requested" {
		t.Fatalf("connection 2 got %+v, want a disconnect frame for refresh_requested", f)
	}
	_ = second.Close()

	third := openSocket(t, s)
	if f := readFrame(t, third); f.Type != "disconnect" || f.Reason != "warning" {
		t.Fatalf("connection 3 got %+v, want only a disconnect frame for warning", f)
	}
	_ = third.Close()

	envs := k.Envelopes()
	if len(envs) != 1 {
		t.Fatalf("%d envelopes, want 1", len(envs))
	}
	e := envs[0]
	var got []string
	for _, send := range e.Sends {
		got = append(got, strings.TrimSpace(fmt.Sprintf("%d %d %s", send.Conn, send.RetryAttempt, send.RetryReason)))
	}
	if strings.Join(got, ", ") != "1 0, 1 0, 2 1 timeout" {
		t.Errorf("sendings (connection, retry_attempt, retry_reason): %q", got)
	}
	if len(e.Acks) != 1 || e.Acks[0].Conn != 2 || e.Acks[0].At.Before(e.Sends[2].At) {
		t.Errorf("acknowledgements %+v, want one on connection 2 after the redelivery", e.Acks)
	}
	testwait.For(t, 5*time.Second, "the three connections ended", func() bool {
		log := k.ConnectionLog()
		return len(log) == 3 && !log[2].Ended.IsZero()
	})
	for i, want := range []string{"dropped", "refresh_requested", "warning"} {
		c := k.ConnectionLog()[i]
		if c.N != i+1 || c.Ending != want || c.Ended.Sub(c.Opened) < 300*time.Millisecond {
			t.Errorf("connection %d: %+v, want ended by %q at least 300ms after its hello", i+1, c, want)
		}
	}
}
