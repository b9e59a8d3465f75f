package slack_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/slack"
)

// slackAckLimit is Slack's limit for acknowledging an envelope. Slack's
// Bolt for Python guide, "Acknowledging requests": "We recommend calling
// ack() right away before initiating any time-consuming processes such as
// fetching information from your database or sending a new message, since
// you only have 3 seconds to respond before Slack registers a timeout
// error." Bolt for JavaScript's says the same ("since you only have 3
// seconds to respond"); the fake's SlackAckWithin is the same figure.
const slackAckLimit = 3 * time.Second

// lostWithin is how soon after a sending its connection may end for the
// envelope to count as lost with it (then Slack sends it again on a later
// connection) rather than as not acknowledged in time: relay acknowledges
// within milliseconds, so a second leaves room for a loaded machine.
const lostWithin = time.Second

// TestClicksAreAcknowledgedWithin3sThroughAReconnectStorm: connections end
// every 1.2 to 3 s, in turn closed without a frame and asked to go by a
// disconnect frame with each of the reasons Slack sends routinely. Slack's
// own Socket Mode client (@slack/socket-mode, SocketModeClient.ts) handles
// `"type": "disconnect"` with `"reason": "warning"` ("creating the second
// connection") and with `"reason": "refresh_requested"` ("closing the old
// WebSocket connection"); slack-go's socketmode.Request says of Reason
// `Reason can be "warning" or else`, and its test frame is
// {"type": "disconnect", "reason": "warning", ...}. People click on every
// connection; Slack delivers some envelopes twice, sends some
// acknowledged ones again, and sends what was not acknowledged within 3 s
// again on a later connection with "retry_attempt" and "retry_reason":
// "timeout" (Slack's Java SDK: `"retry_reason": "timeout", in Socket
// Mode`). Alarm management answers slowly. Every sending of every
// envelope, on every connection, must be acknowledged within 3 s of being
// sent, unless its connection ended within a second of it (then it must
// be sent again, and that acknowledged in time); every click must change
// its alarm exactly once, under its own envelope id, and none may be lost;
// no more than 8 clicks are handed over at once.
func TestClicksAreAcknowledgedWithin3sThroughAReconnectStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("a reconnect storm of about ten seconds of real time")
	}
	const storm = 5 // connections that end; the next stays open
	rng := rand.New(rand.NewPCG(36, 7))
	reasons := []string{"", "refresh_requested", "warning"}
	plan := map[int]notifytest.SocketEnd{}
	for n := 1; n <= storm; n++ {
		plan[n] = notifytest.SocketEnd{After: 1200*time.Millisecond + time.Duration(rng.Int64N(int64(1800*time.Millisecond))), Reason: reasons[n%len(reasons)]}
	}
	acts := &actions{slow: 150 * time.Millisecond}
	a := listen(t, acts, appToken, func(_ *notifytest.Slack, sock *notifytest.SlackSocket) {
		sock.EndConnections(func(n int) notifytest.SocketEnd { return plan[n] })
	})

	clicked := map[string]string{} // alarm → envelope id
	click := func(n, i int) string {
		alarm := fmt.Sprintf("c%d-%d", n, i)
		id := a.click(fmt.Sprintf("U%d", i), slack.ActionAck, alarm)
		clicked[alarm] = id
		return id
	}
	var previous []string
	for n := 1; n <= storm+1; n++ {
		if !a.opens(n, 10*time.Second) {
			t.Errorf("connection %d did not open within 10s", n)
			break
		}
		ids := []string{click(n, 1), click(n, 2), click(n, 3)}
		a.sock.Duplicate(ids[0])
		if len(previous) > 0 {
			a.sock.Resend(previous[rng.IntN(len(previous))], "timeout")
		}
		if n <= storm {
			// One click halfway, and on a connection that will be dropped
			// one just before, which may be lost with it.
			opened := a.sock.ConnectionLog()[n-1].Opened
			time.Sleep(time.Until(opened.Add(plan[n].After / 2)))
			ids = append(ids, click(n, 4))
			if plan[n].Reason == "" {
				time.Sleep(time.Until(opened.Add(plan[n].After - 10*time.Millisecond)))
				ids = append(ids, click(n, 5))
			}
		}
		previous = ids
	}

	// Settle: every envelope acknowledged since its last sending, and every
	// click at alarm management. On failure, the figures below say why.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !settled(a, acts, clicked) {
		time.Sleep(20 * time.Millisecond)
	}

	conns := a.sock.ConnectionLog()
	var (
		sends, dups, resent, lost int
		ackedLater                int
		worst                     time.Duration
		late                      []string
	)
	start := conns[0].Opened
	perConn := make([]time.Duration, len(conns)+1)
	for _, e := range a.sock.Envelopes() {
		for i, s := range e.Sends {
			sends++
			if i > 0 && s.RetryAttempt == e.Sends[i-1].RetryAttempt {
				dups++
			} else if s.RetryAttempt > 0 {
				resent++
			}
			took, conn, ok := ackAfter(e, s)
			if ok && conn != s.Conn {
				ackedLater++
			}
			if ok && took <= slackAckLimit {
				worst = max(worst, took)
				perConn[s.Conn] = max(perConn[s.Conn], took)
				continue
			}
			if !s.ConnEnded.IsZero() && s.ConnEnded.Sub(s.At) < lostWithin {
				lost++
				continue
			}
			what := "never acknowledged"
			if ok {
				what = "acknowledged after " + took.Round(time.Millisecond).String()
			}
			late = append(late, fmt.Sprintf("%s sent at +%.2fs on connection %d (retry %d): %s",
				e.ID, s.At.Sub(start).Seconds(), s.Conn, s.RetryAttempt, what))
		}
		if last := e.Sends[len(e.Sends)-1]; !acked(e, last) && !last.ConnEnded.IsZero() && last.ConnEnded.Sub(last.At) < lostWithin {
			late = append(late, fmt.Sprintf("%s: lost with connection %d and not sent again", e.ID, last.Conn))
		}
	}
	var lives []string
	for i, c := range conns {
		life := "open"
		if !c.Ended.IsZero() {
			life = fmt.Sprintf("%.1fs %s", c.Ended.Sub(c.Opened).Seconds(), cmp.Or(c.Ending, "closed by relay"))
		}
		lives = append(lives, fmt.Sprintf("#%d %s, slowest ack %v", i+1, life, perConn[i+1].Round(time.Millisecond)))
	}
	t.Logf("%d connections (%s); %d envelopes, %d sendings (%d duplicates, %d sent again), %d lost with their connection, "+
		"%d acknowledged on a later connection; slowest acknowledgement %v",
		len(conns), strings.Join(lives, "; "), len(clicked), sends, dups, resent, lost, ackedLater, worst.Round(time.Millisecond))
	if len(conns) < storm+1 {
		t.Errorf("%d connections, want at least %d", len(conns), storm+1)
	}
	for _, l := range late {
		t.Errorf("not acknowledged within 3s: %s", l)
	}

	// Each click changed its alarm once, under its own envelope id.
	for alarm, id := range clicked {
		refs := acts.Applied(alarm)
		if len(refs) != 1 || refs[0] != id {
			t.Errorf("%s was changed by the clicks %v, want once, by its envelope %s", alarm, refs, id)
		}
	}
	for _, c := range acts.Calls() {
		if clicked[c.Alarms[0]] != c.Ref {
			t.Errorf("Act got %s with Ref %s, want its envelope %s", c.Alarms[0], c.Ref, clicked[c.Alarms[0]])
		}
	}
	if most := acts.MostAtOnce(); most > 8 {
		t.Errorf("%d clicks handed to Actions at once, want at most 8", most)
	}
	if _, reused := a.sock.Refused(); reused != 0 || a.sock.Opens() != len(conns) {
		t.Errorf("%d apps.connections.open for %d connections, %d reused URLs; want a fresh URL for each", a.sock.Opens(), len(conns), reused)
	}
}

// opens waits up to limit for the n-th connection to be open, and
// reports whether it was.
func (a *app) opens(n int, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, open := a.sock.Connections(); got >= n && open {
			return true
		}
	}
	return false
}

// settled reports whether every envelope was acknowledged since its last
// sending, none waits for a connection, and every click reached Act.
func settled(a *app, acts *actions, clicked map[string]string) bool {
	if a.sock.Pending() > 0 {
		return false
	}
	for _, e := range a.sock.Envelopes() {
		if !acked(e, e.Sends[len(e.Sends)-1]) {
			return false
		}
	}
	seen := map[string]bool{}
	for _, c := range acts.Calls() {
		seen[c.Alarms[0]] = true
	}
	for alarm := range clicked {
		if !seen[alarm] {
			return false
		}
	}
	return true
}

// ackAfter returns how long after s the first acknowledgement of e came,
// and on which connection.
func ackAfter(e notifytest.SocketEnvelope, s notifytest.SocketSend) (time.Duration, int, bool) {
	i := slices.IndexFunc(e.Acks, func(a notifytest.SocketAck) bool { return !a.At.Before(s.At) })
	if i < 0 {
		return 0, 0, false
	}
	return e.Acks[i].At.Sub(s.At), e.Acks[i].Conn, true
}
