// Package notify is what every sink shares (docs/design.md §8): the Sink
// interface a sink type implements, the Delivery it is handed and the Result
// it answers, the interfaces of sinks that pipeline, digest or remind, the
// HTTP poster that classifies vendors' answers, the rate limiters, and the
// fenced transport. The sink types themselves (nats, slack, webhook,
// console, dingtalk, feishu, wecom, teams, pagerduty, telegram, email) live
// in packages below it, listed by internal/notify/registry.
//
// As in Alertmanager's notify pipeline, each sink is one small type whose Send
// makes one attempt and says whether a failure is worth retrying. Ordering,
// retries with backoff, Retry-After, dead letters, max_age and metrics live
// once, in the delivery engine (internal/deliver), which sinks never see.
package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// Sink is one destination of events. Send makes exactly one attempt to
// deliver d. A nil error means the sink has the event; Result.Memory is then
// stored with the delivery. A non-nil error means it may not have it:
// Result.Retry says whether another attempt can succeed, and
// Result.RetryAfter how long the sink asked to be left alone.
//
// The Deliverer calls Send for one sink from one goroutine at a time, in
// outbox order. Errors returned by Send are logged and stored as dead-letter
// reasons, so they must never contain a secret.
type Sink interface {
	// Name returns the sink's name from the rules file.
	Name() string
	// Send makes one delivery attempt.
	Send(ctx context.Context, d Delivery) (Result, error)
}

// Delivery is one attempt at delivering one event to one sink.
type Delivery struct {
	// EventID is the event's id, which receivers de-duplicate by.
	EventID string
	// OriginID is the alarm's id upstream.
	OriginID string
	// Level is the event's level.
	Level int
	// Body is the event's JSON, the exact bytes every sink sends. It may be
	// shared with other deliveries of the event: it must not be modified.
	Body []byte
	// EnqueuedAt is when the event entered the sink's outbox.
	EnqueuedAt time.Time
	// Event is Body decoded.
	Event *event.Event
	// Memory is what this sink stored with earlier deliveries of the same
	// alarm (such as the Slack message of the start), or nil.
	Memory map[string]string
	// Attempt counts the attempts at this delivery, starting at 1.
	Attempt int
	// TraceParent, when tracing is on, is the W3C trace context of this
	// attempt's span (docs/design.md §11, "Traces"); a sink whose messages
	// have headers sends it as traceparent. Empty otherwise.
	TraceParent string
}

// HeaderTraceParent is the header (HTTP, NATS) in which a sink sends
// Delivery.TraceParent, as W3C trace context names it.
const HeaderTraceParent = "traceparent"

// Decoded returns d.Event, or Body decoded when a caller left Event nil (the
// Deliverer always sets it).
func (d Delivery) Decoded() (*event.Event, error) {
	if d.Event != nil {
		return d.Event, nil
	}
	ev, err := event.Unmarshal(d.Body)
	if err != nil {
		return nil, fmt.Errorf("event %s does not decode: %w", d.EventID, err)
	}
	return &ev, nil
}

// DefaultMaxAge is how long an event may wait in a sink's outbox before it
// is dead-lettered, when the sink's max_age does not say.
const DefaultMaxAge = 24 * time.Hour

// DefaultMaxRetryAfter caps the wait a receiver's Retry-After asks for, when
// the sink's max_retry_after does not say.
const DefaultMaxRetryAfter = 15 * time.Minute

// Result is what a Send says besides its error.
type Result struct {
	// Retry says a failed attempt is worth repeating. When false, a failure
	// dead-letters the entry at once.
	Retry bool
	// RetryAfter is the least time to wait before the next attempt, as
	// asked by the sink's server (Retry-After); zero leaves it to backoff.
	RetryAfter time.Duration
	// Memory, after a successful Send, is stored as the sink's memory of the
	// alarm in the same transaction that removes the entry from the outbox.
	// Nil keeps the memory stored before.
	Memory map[string]string
}

// Pipeliner is implemented by sinks that can have many deliveries in flight
// at once, such as JetStream with asynchronous publishes. The Deliverer hands
// SendAll runs of consecutive entries that concern distinct alarms, so that
// for one alarm an end is never in flight with its start. When one delivery
// of a run fails, the later ones that succeeded stay delivered and the failed
// one is retried: deliveries of different alarms may then land out of order,
// those of one alarm never do.
type Pipeliner interface {
	Sink
	// SendAll makes one attempt at each of ds and returns their outcomes,
	// one per delivery, in order.
	SendAll(ctx context.Context, ds []Delivery) []Outcome
}

// Concurrent is implemented by Pipeliner sinks whose SendAll makes at most
// Concurrency requests at once, one request per delivery (webhooks): the
// Deliverer's attempt timeout then bounds each request, and a run as many
// times as its requests go one after another. A Pipeliner that is not
// Concurrent sends a run at once (JetStream), bounded by one timeout.
type Concurrent interface {
	Concurrency() int
}

// Outcome is the result of one delivery of a SendAll, as Send returns it.
type Outcome struct {
	Result Result
	Err    error
}
