package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// pollKey marks a context that carries the start of a poll (StartPoll).
type pollKey struct{}

// StartPoll starts the span of one poll, a trace of its own named
// "poll <query>", of which the upstream's calls made with the returned
// context are children. The transitions the poll's answer produces start
// their own traces at the poll's start, linked to it (Transitions).
func (t *Tracer) StartPoll(ctx context.Context, query string, page int) (context.Context, trace.Span) {
	now := time.Now()
	ctx, span := t.tracer.Start(ctx, "poll "+query, trace.WithNewRoot(), trace.WithTimestamp(now),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrQuery.String(query), AttrPage.Int(page)))
	return context.WithValue(ctx, pollKey{}, now), span
}

// EndPoll ends the span of a poll, with how many records its answer held
// and its error.
func EndPoll(span trace.Span, records int, err error) {
	span.SetAttributes(AttrRecords.Int(records))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Transitions are the traces of the transitions one store transaction
// records: for each, a root span that starts with the poll that saw it, with
// a child for the transaction, ended together once it committed.
type Transitions struct {
	t      *Tracer
	start  time.Time // of the poll, or of the transaction without one
	commit time.Time // of the transaction
	link   []trace.Link
	spans  []trace.Span // root and commit, in pairs
}

// Transitions returns the traces of the transitions of a transaction
// starting now under ctx, nil when t is off. When ctx is a poll's
// (StartPoll), each root span starts at the poll's start and links to it.
func (t *Tracer) Transitions(ctx context.Context) *Transitions {
	if t == nil {
		return nil
	}
	now := time.Now()
	ts := &Transitions{t: t, start: now, commit: now}
	if s, ok := ctx.Value(pollKey{}).(time.Time); ok {
		ts.start = s
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		ts.link = []trace.Link{{SpanContext: sc}}
	}
	return ts
}

// Start starts the trace of one transition, its root span named name
// ("alarm start"), and returns the trace context its event carries.
func (ts *Transitions) Start(name string, attrs ...attribute.KeyValue) Parent {
	ctx, root := ts.t.tracer.Start(context.Background(), name, trace.WithNewRoot(), trace.WithTimestamp(ts.start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(ts.link...), trace.WithAttributes(attrs...))
	_, commit := ts.t.tracer.Start(ctx, "store commit", trace.WithTimestamp(ts.commit),
		trace.WithSpanKind(trace.SpanKindInternal))
	ts.spans = append(ts.spans, commit, root)
	return ts.t.ParentOf(ctx)
}

// End ends every span started, once the transaction committed or failed
// with err (its transitions then never reach a sink).
func (ts *Transitions) End(err error) {
	if ts == nil {
		return
	}
	now := time.Now()
	for _, s := range ts.spans {
		if err != nil {
			s.SetStatus(codes.Error, "not committed: "+err.Error())
		}
		s.End(trace.WithTimestamp(now))
	}
	ts.spans = nil
}
