package notify

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// ActionKind is what a person asks of relay about alarms (docs/design.md
// §8, "Acknowledgement and escalation").
type ActionKind string

// The actions a person can take.
const (
	// Acknowledge records that someone took the alarm: escalation stops,
	// and reminders too unless their route says repeat_until: cleared.
	Acknowledge ActionKind = "ack"
	// Unacknowledge takes an acknowledgement back.
	Unacknowledge ActionKind = "unack"
	// Shelve mutes the alarm's point (its device and event code) for
	// Action.ShelveFor, or until the alarm clears when that is zero: a
	// silence, made by the person who clicked.
	Shelve ActionKind = "shelve"
)

// Actor is who acted, as the chat they acted from names them.
type Actor struct {
	// Via is where the action came from: "slack", "telegram", "feishu",
	// or "api" (relay ack, the console).
	Via string `json:"via"`
	// ID is the chat's id of the person: a Slack user id (U…), a Telegram
	// user id, a Feishu open_id; for "api", the name given with --by.
	ID string `json:"id"`
	// Name is the person's name as the chat gives it, when it does.
	Name string `json:"name,omitempty"`
	// Groups are the chat's groups the person is known to belong to (Slack
	// user group ids), when the listener looked them up; ack_by may name
	// them.
	Groups []string `json:"groups,omitempty"`
}

// Action is one thing a person asked, from a button or a command.
type Action struct {
	Kind ActionKind
	// Sink is the sink whose message carried the button ("" for the API).
	Sink string
	// Alarms are the alarms acted on, each an originId or an AlarmRef of
	// one. A button on a digest names the
	// digest instead (Digest), and the action covers the alarms it lists.
	Alarms []string
	Digest string
	// Destinations, when Sink is not known, are where the message that
	// carried the button is, as a sink's destination may name it
	// (route.Sink.Destination): "telegram:<chat id>", "telegram:@<name>".
	// A digest is looked for there.
	Destinations []string
	// ShelveFor is how long Shelve mutes the alarm; zero is until it
	// clears.
	ShelveFor time.Duration
	Actor     Actor
	Comment   string
	// Ref identifies the click for logs (an envelope id, a callback query
	// id); the same click delivered twice carries the same Ref.
	Ref string
}

// ActionResult is what became of an Action, for the reply the person sees.
type ActionResult struct {
	// Applied are the alarms the action changed.
	Applied []string
	// Unchanged are the alarms it left as they were, each with why
	// ("already acknowledged by <@U1> at 08:02", "over", "unknown").
	Unchanged map[string]string
	// NotAllowed says the actor may not act on these alarms (the route's
	// ack_by does not name them): nothing changed, and the reply goes to
	// them alone.
	NotAllowed bool
	// Text is a short reply for the person: what was done, or why not.
	Text string
}

// Actions applies people's actions: relay's alarm state behind the
// listeners. It is safe for concurrent use, and idempotent: an action
// delivered twice (a retried envelope, two people at once) changes the
// alarm once, and the first actor is the one recorded.
type Actions interface {
	Act(ctx context.Context, a Action) (ActionResult, error)
}

// Listener is implemented by sinks that read people's clicks through an
// outbound connection (Slack Socket Mode, Telegram getUpdates, the Feishu
// long connection), so that relay needs no public endpoint.
type Listener interface {
	Sink
	// ListenKey names the connection the sink's clicks arrive on. Sinks
	// with one key share one connection (one Slack app, one Telegram bot):
	// the service runs one Listen per key. "" means the sink listens to
	// nothing (its chat has no connection configured).
	ListenKey() string
	// Listen holds the connection until ctx ends, reconnecting with backoff
	// after a failure, and hands every click to acts. It returns nil when
	// ctx ends, or an error that reconnecting cannot cure (a token the chat
	// refuses).
	Listen(ctx context.Context, acts Actions) error
}

// GroupListener is a Listener whose clicks do not name the sink whose
// message carried them (a Telegram button's 64 bytes hold the action and the
// alarm, not the sink), so that it tells the sink by where the message is
// (its chat). The service calls ListenFor instead of Listen, with every sink
// of the listener's key, itself included, so that a click in the chat of
// any of them names that sink (Action.Sink), which finds the digest it
// acknowledges.
type GroupListener interface {
	Listener
	// ListenFor is Listen for the clicks on the messages of sinks, the
	// sinks that share the listener's ListenKey.
	ListenFor(ctx context.Context, acts Actions, sinks []Listener) error
}

// AckCarrier is implemented by sinks that take the ack and unack
// transitions of alarms whose start they got: the bus publishes them, a
// chat edits the start's message to show who acknowledged it, PagerDuty
// acknowledges its alert. Other sinks never see them.
type AckCarrier interface {
	Sink
	CarriesAcks() bool
}

// maxRefLen is the longest originId AlarmRef keeps as it is: a Telegram
// button's callback_data holds at most 64 bytes, with room for the action.
const maxRefLen = 48

// AlarmRef is how a button names an alarm: its originId when that is at
// most 48 bytes, else "#" and 22 characters of the base64url SHA-256 of
// it, which Actions resolves among the alarms relay knows (ResolveRef).
func AlarmRef(originID string) string {
	if len(originID) <= maxRefLen && !strings.HasPrefix(originID, "#") {
		return originID
	}
	sum := sha256.Sum256([]byte(originID))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])[:22]
}

// RefMatches reports whether ref, from AlarmRef, names originID.
func RefMatches(ref, originID string) bool { return AlarmRef(originID) == ref }
