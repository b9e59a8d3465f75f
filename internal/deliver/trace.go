package deliver

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// The spans of delivery attempts (docs/design.md §11, "Traces"). Each
// attempt at an entry whose event carries trace context is a span "send
// <sink>" in the event's trace, open until the loop decides what the
// attempt means: delivered (ended), retried (a "retry" event with the error
// and the wait, error status) or given up (a "dead letter" event with the
// reason). A dead letter without an attempt of its own (max_age ran out
// during a wait) is a short span of its own. With tracing off none of this
// runs: startSend is the only entry, and it returns at its first test.

// startSend starts the span of the attempt-th attempt at e, whose event is
// ev, and returns the traceparent the sink sends with it; empty when
// tracing is off or ev carries no trace context.
func (l *sinkLoop) startSend(e store.Entry, ev *event.Event, attempt int, digest bool) string {
	t := l.d.opts.Tracer
	if !t.Enabled() || ev == nil || ev.TraceParent == "" {
		return ""
	}
	if old := l.spans[e.Seq]; old != nil {
		// A failure of a run retried at once: its outcome went stale while
		// an earlier failure of the run was waited for (failed).
		old.AddEvent("retry", trace.WithAttributes(tracing.AttrRetryIn.String("0s")))
		old.End()
	}
	attrs := l.attrs(e, ev, attempt)
	if digest {
		attrs = append(attrs, tracing.AttrDigest.Bool(true))
	}
	ctx := t.ContextOf(context.Background(), tracing.Parent{TraceParent: ev.TraceParent, TraceState: ev.TraceState})
	ctx, span := t.Start(ctx, "send "+l.name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	if l.spans == nil {
		l.spans = make(map[uint64]trace.Span)
	}
	l.spans[e.Seq] = span
	return t.ParentOf(ctx).TraceParent
}

// attrs are the attributes of a span about e, whose event is ev: the
// semantic conventions' messaging attributes, then relay's own. None holds
// a secret: the sink is named by its name, type and shown target.
func (l *sinkLoop) attrs(e store.Entry, ev *event.Event, attempt int) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	if l.t.Type != "" {
		attrs = append(attrs, semconv.MessagingSystemKey.String(l.t.Type), tracing.AttrSinkType.String(l.t.Type))
	}
	attrs = append(attrs, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"),
		semconv.MessagingDestinationName(l.name), semconv.MessagingMessageID(e.EventID),
		semconv.MessagingMessageBodySize(len(e.Body)),
		tracing.AttrOrigin.String(e.OriginID), tracing.AttrTransition.String(string(e.Transition)),
		tracing.AttrTenant.String(ev.Data.TenantID), tracing.AttrAttempt.Int(attempt))
	if l.t.Target != "" {
		attrs = append(attrs, tracing.AttrSinkTarget.String(l.t.Target))
	}
	return attrs
}

// failed marks the span of the attempt at e that failed with err (cleaned
// of secrets) before the loop decides on it: a run's failures are decided
// one after another.
func (l *sinkLoop) failed(e store.Entry, err error) {
	if span := l.spans[e.Seq]; span != nil {
		span.SetStatus(codes.Error, err.Error())
	}
}

// delivered ends the spans of the attempt that delivered es.
func (l *sinkLoop) delivered(es []store.Entry) {
	if l.spans == nil {
		return
	}
	for _, e := range es {
		if span := l.spans[e.Seq]; span != nil {
			span.SetStatus(codes.Ok, "")
			span.End()
			delete(l.spans, e.Seq)
		}
	}
}

// retrying ends the spans of the attempt at es that failed with err (its
// text cleaned of secrets) and is retried after wait.
func (l *sinkLoop) retrying(es []store.Entry, err error, wait time.Duration) {
	if l.spans == nil {
		return
	}
	for _, e := range es {
		if span := l.spans[e.Seq]; span != nil {
			span.AddEvent("retry", trace.WithAttributes(tracing.AttrError.String(err.Error()),
				tracing.AttrRetryIn.String(wait.String())))
			span.SetStatus(codes.Error, err.Error())
			span.End()
			delete(l.spans, e.Seq)
		}
	}
}

// deadLettered records that e became a dead letter of kind for reason
// (cleaned of secrets): on the span of its last attempt when still open,
// else on a span "dead letter <sink>" of its own in its event's trace.
func (l *sinkLoop) deadLettered(e store.Entry, attempts int, kind, reason string) {
	t := l.d.opts.Tracer
	if !t.Enabled() {
		return
	}
	span := l.spans[e.Seq]
	delete(l.spans, e.Seq)
	if span == nil {
		ev, err := l.d.store.Event(e)
		if err != nil || ev.TraceParent == "" {
			return
		}
		ctx := t.ContextOf(context.Background(), tracing.Parent{TraceParent: ev.TraceParent, TraceState: ev.TraceState})
		_, span = t.Start(ctx, "dead letter "+l.name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(l.attrs(e, ev, attempts)...))
	}
	span.AddEvent("dead letter", trace.WithAttributes(tracing.AttrKind.String(kind), tracing.AttrReason.String(reason)))
	span.SetStatus(codes.Error, reason)
	span.End()
}

// abandon ends the spans of attempts left undecided when the loop stopped
// (its context ended, or the fence refused): their entries stay in the
// outbox for the next run.
func (l *sinkLoop) abandon() {
	for seq, span := range l.spans {
		span.SetStatus(codes.Error, "stopped: the entry stays in the outbox")
		span.End()
		delete(l.spans, seq)
	}
}
