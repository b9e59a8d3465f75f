package deliver_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/tracing"
)

// traceSink answers the first attempt at each event as script says (503
// retried, 400 refused) and records the traceparent of every attempt.
type traceSink struct {
	script map[string]int
	mu     sync.Mutex
	got    map[string][]string // event id to the traceparent of each attempt
}

func (s *traceSink) Name() string { return "pipe" }

func (s *traceSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *traceSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]notify.Outcome, len(ds))
	for k, d := range ds {
		s.got[d.EventID] = append(s.got[d.EventID], d.TraceParent)
		if len(s.got[d.EventID]) > 1 {
			continue
		}
		switch s.script[d.EventID] {
		case 400:
			out[k] = notify.Outcome{Err: errors.New("400 bad request")}
		case 503:
			out[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: errors.New("503 unavailable")}
		}
	}
	return out
}

// TestEveryAttemptIsASpanInItsEventsTraceWithItsFate delivers the starts of
// four alarms in one pipelined run, one refused and two retried:
// each attempt is a send span under its event's root, carrying the
// traceparent the sink got, and says what became of it.
func TestEveryAttemptIsASpanInItsEventsTraceWithItsFate(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracer, err := tracing.New(context.Background(), tracing.Config{Exporter: exp, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	f := delivertest.New(t, "pipe")
	f.Trace(tracer)
	occurred := f.Clock.Now().Add(-time.Minute)
	roots := map[string]string{}
	for _, id := range []string{"a", "b", "c", "d"} {
		ev := f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))[0]
		if ev.TraceParent == "" {
			t.Fatalf("event %s has no trace context", ev.ID)
		}
		roots[ev.ID] = ev.TraceParent
	}
	sink := &traceSink{script: map[string]int{"a:start": 400, "b:start": 503, "c:start": 503}, got: map[string][]string{}}
	_, stop := f.RunDeliverer(deliver.Options{Tracer: tracer}, deliver.Target{Sink: sink, Type: "webhook", Target: "http://127.0.0.1"})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()

	spans := exp.GetSpans()
	var sends int
	for _, s := range spans {
		if s.Name != "send pipe" {
			continue
		}
		sends++
		id := attr(s, "messaging.message.id")
		root := roots[id]
		if s.SpanContext.TraceID().String() != root[3:35] || s.Parent.SpanID().String() != root[36:52] {
			t.Errorf("%s: send span is not a child of the event's root %s", id, root)
		}
		attempt := attr(s, "relay.attempt")
		want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
		if got := sink.got[id]; !slices.Contains(got, want) {
			t.Errorf("%s attempt %s: sink got traceparents %v, span is %s", id, attempt, got, want)
		}
		for key, want := range map[string]string{"messaging.system": "webhook", "messaging.destination.name": "pipe",
			"relay.sink.target": "http://127.0.0.1", "relay.transition": "start", "relay.origin_id": id[:1]} {
			if got := attr(s, key); got != want {
				t.Errorf("%s: %s = %q, want %q", id, key, got, want)
			}
		}
		first := s.SpanContext.SpanID().String() == sink.got[id][0][36:52]
		switch {
		case id == "a:start":
			if s.Status.Code != codes.Error || !hasEvent(s, "dead letter") {
				t.Errorf("a's refused attempt: status %v, events %v", s.Status, s.Events)
			}
		case (id == "b:start" || id == "c:start") && first:
			// c's outcome went stale while b's failure was waited for:
			// it is attempted again at once.
			if s.Status.Code != codes.Error || !hasEvent(s, "retry") {
				t.Errorf("%s's failed attempt: status %v, events %v", id, s.Status, s.Events)
			}
		default:
			if s.Status.Code != codes.Ok || len(s.Events) != 0 {
				t.Errorf("%s attempt %s: status %v, events %v", id, attempt, s.Status, s.Events)
			}
		}
	}
	if sends != 6 {
		t.Errorf("%d send spans, want 6 (b and c twice, a and d once)", sends)
	}
}

// TestWithoutTracingNoAttemptCarriesTraceContext: the same run without a
// tracer hands sinks no traceparent.
func TestWithoutTracingNoAttemptCarriesTraceContext(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b"} {
		if ev := f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))[0]; ev.TraceParent != "" {
			t.Fatalf("an untraced store wrote trace context into %s", ev.ID)
		}
	}
	sink := &traceSink{got: map[string][]string{}}
	_, stop := f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	for id, tps := range sink.got {
		for _, tp := range tps {
			if tp != "" {
				t.Errorf("%s was sent with traceparent %q", id, tp)
			}
		}
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}
