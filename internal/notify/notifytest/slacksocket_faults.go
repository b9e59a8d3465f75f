package notifytest

import "time"

// slackMaxRetries is how many times Slack sends an envelope again: its
// Events API retries a delivery up to three times.
const slackMaxRetries = 3

// retryTimeout is the retry_reason of an envelope sent again for want of
// an acknowledgement, as Slack's SDKs show it in Socket Mode
// ("retry_reason": "timeout").
const retryTimeout = "timeout"

// SocketEnd is how the fake ends a connection, for EndConnections.
type SocketEnd struct {
	// After is how long after its hello the connection ends; 0 leaves it
	// open.
	After time.Duration
	// Reason is the reason of the disconnect frame the fake sends
	// ("refresh_requested", "warning"); "" closes the connection without
	// a frame, as a network failure does.
	Reason string
}

// RetryUnacked sends again every envelope not yet acknowledged, with
// retry_attempt one more than its last sending and retry_reason reason
// (Slack says "timeout" when no acknowledgement came), and returns how
// many.
func (k *SlackSocket) RetryUnacked(reason string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, id := range k.order {
		e := k.envelopes[id]
		if len(e.Acks) > 0 || k.queued(id) {
			continue
		}
		n++
		k.sendLocked(id, nextAttempt(e), reason)
	}
	return n
}

// RedeliverAfter sets how long the fake waits for the acknowledgement of
// a sending before it sends the envelope again (SlackAckWithin unless
// set; 0 never): at once on the open connection when that is a later one
// than the sending's, or else on the next connection, with retry_attempt
// one more and retry_reason "timeout", up to three times.
func (k *SlackSocket) RedeliverAfter(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.redeliverAfter = d
}

// EndConnections makes the fake end each connection from now on as plan
// says for it (n is 1 for the first), timed from its hello: closed
// without a frame, or sent a disconnect frame, so that connections keep
// ending every few seconds. plan is called without the fake's lock.
func (k *SlackSocket) EndConnections(plan func(n int) SocketEnd) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.plan = plan
}

// Drop closes the open connection abruptly, without a close frame, as a
// network failure does. Envelopes clicked after it wait for the next
// connection.
func (k *SlackSocket) Drop() {
	k.mu.Lock()
	c := k.current
	k.mu.Unlock()
	k.drop(c)
}

// Disconnect sends the open connection a disconnect frame with reason
// (refresh_requested, warning, link_disabled), as Slack does before it
// rotates a connection; envelopes clicked after it wait for the next
// connection. The connection itself stays open until the app closes it.
func (k *SlackSocket) Disconnect(reason string) {
	k.mu.Lock()
	c := k.current
	k.mu.Unlock()
	k.disconnect(c, reason)
}

// Resend sends envelope id again, acknowledged or not, with retry_attempt
// one more than its last sending and retry_reason reason: Slack does so
// when an acknowledgement came too late.
func (k *SlackSocket) Resend(id, reason string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.envelopes[id]; ok {
		k.sendLocked(id, nextAttempt(e), reason)
	}
}

// Duplicate sends envelope id once more on the open connection exactly as
// it was last sent, with the same retry_attempt, as Slack's at-least-once
// delivery may. It reports whether a connection was open to send it on.
func (k *SlackSocket) Duplicate(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.envelopes[id]
	if !ok || k.current == nil || len(e.Sends) == 0 {
		return false
	}
	last := e.Sends[len(e.Sends)-1]
	k.sendLocked(id, last.RetryAttempt, last.RetryReason)
	return true
}

// nextAttempt is the retry_attempt of e's next sending.
func nextAttempt(e *SocketEnvelope) int {
	if len(e.Sends) == 0 {
		return 0
	}
	return e.Sends[len(e.Sends)-1].RetryAttempt + 1
}

// drop closes c without a close frame.
func (k *SlackSocket) drop(c *socketConn) {
	if c == nil || k.closed() {
		return
	}
	k.mu.Lock()
	open := c.ended.IsZero()
	if open && c.ending == "" {
		c.ending = "dropped"
	}
	k.endLocked(c)
	k.mu.Unlock()
	if open {
		_ = c.ws.NetConn().Close()
	}
}

// disconnect sends c a disconnect frame with reason, unless it ended.
func (k *SlackSocket) disconnect(c *socketConn, reason string) {
	if c == nil || k.closed() {
		return
	}
	k.mu.Lock()
	open := c.ended.IsZero()
	if open {
		if c.ending == "" {
			c.ending = reason
		}
		if k.current == c {
			k.current = nil
		}
	}
	k.mu.Unlock()
	if open {
		_ = c.write(map[string]any{"type": "disconnect", "reason": reason,
			"debug_info": map[string]any{"host": "applink-fake"}})
	}
}

// overdue sends envelope id again when its sending n has waited
// redeliverAfter without an acknowledgement and was its last.
func (k *SlackSocket) overdue(id string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed() {
		return
	}
	e := k.envelopes[id]
	if n != len(e.Sends)-1 || k.queued(id) {
		return
	}
	s := e.Sends[n]
	for _, a := range e.Acks {
		if !a.At.Before(s.At) {
			return
		}
	}
	if s.RetryAttempt >= slackMaxRetries {
		return
	}
	if c := k.current; c != nil && c.n > s.Conn {
		k.sendLocked(id, s.RetryAttempt+1, retryTimeout)
		return
	}
	k.queue = append(k.queue, id)
}
