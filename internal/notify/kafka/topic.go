package kafka

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
)

// DefaultTopic is the topic of every event when the rules set none: one
// topic, keyed by alarm, so that a consumer reads one log and every alarm's
// events stay in order on their partition.
const DefaultTopic = "energy.alarms"

// MaxTopicLength is the longest topic name a Kafka broker accepts (Kafka's
// Topic.validate: at most 249 characters, each an ASCII letter or digit, '.',
// '_' or '-', and not "." or "..").
const MaxTopicLength = 249

// tenantPlaceholder is the one placeholder a topic may hold: a tenant's
// events in a topic of their own.
const tenantPlaceholder = "{tenant}"

// Topic is a compiled topic: a fixed name, or a name with {tenant} where
// each event's tenant id goes.
type Topic struct {
	text string
	// parts are the literal pieces between the placeholders: one piece for
	// a fixed name.
	parts []string
}

// CompileTopic reads a topic. A fixed name must be a name Kafka accepts;
// a name with {tenant} must be one for a tenant id of one letter, and
// refuses any other brace: escaping a value would give a topic nobody
// subscribed to, so Render refuses a tenant id Kafka would not take
// instead.
func CompileTopic(text string) (*Topic, error) {
	parts := strings.Split(text, tenantPlaceholder)
	for _, p := range parts {
		if strings.ContainsAny(p, "{}") {
			return nil, fmt.Errorf("%q: the only placeholder a Kafka topic takes is {tenant}", text)
		}
	}
	t := &Topic{text: text, parts: parts}
	if len(parts) == 1 {
		if err := ValidTopic(text); err != nil {
			return nil, fmt.Errorf("%q: %w", text, err)
		}
		return t, nil
	}
	if err := ValidTopic(strings.Join(parts, "x")); err != nil {
		return nil, fmt.Errorf("%q: %w", text, err)
	}
	return t, nil
}

// ValidTopic says why Kafka would refuse name as a topic, or nil when it
// takes it. Names that begin with "__" are the brokers' own
// (__consumer_offsets, __transaction_state): refused too.
func ValidTopic(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty topic")
	case name == "." || name == "..":
		return fmt.Errorf("a topic cannot be %q", name)
	case len(name) > MaxTopicLength:
		return fmt.Errorf("%d characters, over Kafka's %d", len(name), MaxTopicLength)
	case strings.HasPrefix(name, "__"):
		return fmt.Errorf("topics that begin with __ are the brokers' own")
	}
	for _, r := range name {
		if !legal(r) {
			return fmt.Errorf("%q is not allowed in a Kafka topic: ASCII letters, digits, '.', '_' and '-' only", r)
		}
	}
	return nil
}

func legal(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// Text returns the topic as written.
func (t *Topic) Text() string { return t.text }

// Templated reports whether the topic holds {tenant}.
func (t *Topic) Templated() bool { return len(t.parts) > 1 }

// Render returns the topic of ev. A tenant id that would make a name Kafka
// refuses (empty, or with a character outside ASCII letters, digits, '.',
// '_' and '-') is an error: the event cannot reach that topic however
// often it is tried.
func (t *Topic) Render(ev *event.Event) (string, error) {
	if !t.Templated() {
		return t.text, nil
	}
	tenant := ev.Data.TenantID
	topic := strings.Join(t.parts, tenant)
	if tenant == "" {
		return "", fmt.Errorf("topic %q: event %s has no tenant id", t.text, ev.ID)
	}
	if err := ValidTopic(topic); err != nil {
		return "", fmt.Errorf("topic %q: tenant id %q of event %s: %w", t.text, tenant, ev.ID, err)
	}
	return topic, nil
}
