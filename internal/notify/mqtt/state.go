package mqtt

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/eclipse/paho.golang/paho"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// book holds the retained states of the ongoing alarms published through
// one broker and client id since the process started, by the sink that
// published them (its tenant and name), across reloads of the rules and
// replaced connections: after a reconnection they are published again,
// since a broker restarted without persistence has forgotten them. A sink
// name's states go when its last sink is closed (the rules no longer
// define it, or this replica no longer serves its tenant).
type book struct {
	// sinks are the open sinks by owner, the one built last at the end:
	// it decides (its retain_state, its fence). Under connsMu.
	sinks map[string][]*Sink

	// pub orders the retained messages: held across each publish of a
	// state and its bookkeeping, so that a state published again after a
	// reconnection never overtakes the end that cleared it.
	pub sync.Mutex
	// mu guards states: by owner, then by the alarm's origin id.
	mu     sync.Mutex
	states map[string]map[string]*state
}

// state is the retained message of one ongoing alarm.
type state struct {
	topic string
	body  []byte
	props *paho.PublishProperties
	qos   byte
}

// join adds s to the open sinks. Under connsMu.
func (b *book) join(s *Sink) { b.sinks[s.owner] = append(b.sinks[s.owner], s) }

// leave removes s from the open sinks; the states of its owner go with
// its last sink. Under connsMu.
func (b *book) leave(s *Sink) {
	live := slices.DeleteFunc(b.sinks[s.owner], func(o *Sink) bool { return o == s })
	if len(live) > 0 {
		b.sinks[s.owner] = live
		return
	}
	delete(b.sinks, s.owner)
	b.mu.Lock()
	delete(b.states, s.owner)
	b.mu.Unlock()
}

// current is the sink that decides for owner's states, or nil.
func (b *book) current(owner string) *Sink {
	connsMu.Lock()
	defer connsMu.Unlock()
	live := b.sinks[owner]
	if len(live) == 0 {
		return nil
	}
	return live[len(live)-1]
}

func (b *book) get(owner, alarm string) *state {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.states[owner][alarm]
}

func (b *book) set(owner, alarm string, st *state) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.states[owner]
	if st == nil {
		delete(m, alarm)
		return
	}
	if m == nil {
		m = map[string]*state{}
		b.states[owner] = m
	}
	m[alarm] = st
}

// publishState publishes the retained state of d's alarm on topic: its
// start, or empty messages that clear it at its end. The topic is
// rendered from the event; where the alarm's state was published on
// another (its level or station changed since), that one is cleared too.
func (s *Sink) publishState(ctx context.Context, c *conn, d notify.Delivery, ev *event.Event, topic string, props *paho.PublishProperties) (notify.Result, error) {
	b := s.book
	b.pub.Lock()
	defer b.pub.Unlock()
	alarm := ev.Data.OriginID
	prev := b.get(s.owner, alarm)
	if ev.Data.Transition == event.Start {
		if prev != nil && prev.topic != topic {
			if res, err := s.publish(ctx, c, d, &paho.Publish{Topic: prev.topic, QoS: s.cfg.QoS, Retain: true, Properties: props}); err != nil {
				return res, err
			}
		}
		res, err := s.publish(ctx, c, d, &paho.Publish{Topic: topic, QoS: s.cfg.QoS, Retain: true, Payload: d.Body, Properties: props})
		if err == nil {
			b.set(s.owner, alarm, &state{topic: topic, body: d.Body, props: props, qos: s.cfg.QoS})
		}
		return res, err
	}
	topics := []string{topic}
	if prev != nil && prev.topic != topic {
		topics = append(topics, prev.topic)
	}
	for _, t := range topics {
		// An empty retained message clears the alarm's state.
		if res, err := s.publish(ctx, c, d, &paho.Publish{Topic: t, QoS: s.cfg.QoS, Retain: true, Properties: props}); err != nil {
			return res, err
		}
	}
	b.set(s.owner, alarm, nil)
	return notify.Result{}, nil
}

// reassert publishes the retained states of the ongoing alarms again after
// c reconnected: a broker restarted without persistence has forgotten
// them. Each goes as the sink that decides for it says: not at all
// without retain_state (they are forgotten), and not past its fence. A
// state changed meanwhile is left to its Send; a failure leaves the rest
// to the next reconnection.
func (c *conn) reassert() {
	b, cfg := c.book, c.cfg
	type ref struct{ owner, alarm string }
	var refs []ref
	b.mu.Lock()
	for owner, m := range b.states {
		for alarm := range m {
			refs = append(refs, ref{owner, alarm})
		}
	}
	b.mu.Unlock()
	slices.SortFunc(refs, func(x, y ref) int {
		if x.owner != y.owner {
			return strings.Compare(x.owner, y.owner)
		}
		return strings.Compare(x.alarm, y.alarm)
	})
	n := 0
	for _, r := range refs {
		err := func() error {
			s := b.current(r.owner)
			if s == nil || !s.cfg.RetainState {
				b.mu.Lock()
				delete(b.states, r.owner)
				b.mu.Unlock()
				return nil
			}
			b.pub.Lock()
			defer b.pub.Unlock()
			st := b.get(r.owner, r.alarm)
			if st == nil {
				return nil
			}
			if err := s.cfg.Fence.Check(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			defer cancel()
			_, err := c.cm.Publish(ctx, &paho.Publish{Topic: st.topic, QoS: st.qos, Retain: true, Payload: st.body, Properties: st.props})
			if err == nil {
				n++
			}
			return err
		}()
		if err != nil {
			cfg.Logger.Warn("mqtt: the ongoing alarms' retained state was not all published again after the reconnection; the next reconnection tries again",
				"broker", cfg.URL.Host, "client_id", cfg.ClientID, "published", n, "of", len(refs), "err", err)
			return
		}
	}
	if n > 0 {
		cfg.Logger.Info("mqtt: the ongoing alarms' retained state published again after the reconnection", "broker", cfg.URL.Host, "client_id", cfg.ClientID, "alarms", n)
	}
}
