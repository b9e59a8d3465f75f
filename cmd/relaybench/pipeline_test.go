package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// startTestNATS starts the bench's embedded nats-server and stream for tb.
func startTestNATS(tb testing.TB) *natsEnv {
	tb.Helper()
	env, err := startNATS(context.Background(), tb.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.close)
	return env
}

// TestPipelineDeliversEveryEventToJetStream runs the P5 pipeline on a few
// events and checks the stream holds each of them once.
func TestPipelineDeliversEveryEventToJetStream(t *testing.T) {
	env := startTestNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := newPipeline(t.TempDir(), "test", env, 301, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.run(ctx)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 301 || res.EventsPerSec <= 0 {
		t.Fatalf("result = %+v, want 301 events at a positive rate", res)
	}
	js := streamInfo(t, env)
	if js != 301 {
		t.Fatalf("stream holds %d messages, want 301", js)
	}
}

// BenchmarkPipeline measures P5: one op is one event (a start or an end of
// a synthetic alarm) applied to a fresh bbolt store in batches of 500,
// routed, and delivered by the notify Deliverer through the JetStream sink to
// an in-process nats-server, until its PubAck. Preparing the records is not
// timed; allocations include the in-process nats-server's.
func BenchmarkPipeline(b *testing.B) {
	env := startTestNATS(b)
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	b.StopTimer()
	p, err := newPipeline(b.TempDir(), "bench", env, b.N, nil, log)
	if err != nil {
		b.Fatal(err)
	}
	defer p.close()
	b.StartTimer()
	res, err := p.run(context.Background())
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.EventsPerSec, "events/s")
	b.ReportMetric(res.ApplyPerSec, "applied-events/s")
}

// streamInfo returns how many messages the bench stream holds.
func streamInfo(tb testing.TB, env *natsEnv) uint64 {
	tb.Helper()
	js, err := jetstream.New(env.nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streamName)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}
