package deliver_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	natssink "github.com/relay-energy/relay/internal/notify/nats"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/store"
)

// BenchmarkDeliverToJetStream measures draining an outbox into a JetStream
// stream on a local server: one op is one event delivered and recorded.
func BenchmarkDeliverToJetStream(b *testing.B) {
	srv := natstest.StartServer(b, natstest.Config{})
	ctx := context.Background()
	nc, err := natsconn.Connect(ctx, natsconn.Options{URL: srv.URL(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	sink, err := natssink.New(nc, natssink.Config{Name: "bus", Subject: delivertest.RenderSubject, SubjectText: delivertest.SubjectText,
		JetStream: true, CreateStream: "ALARMS", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(b.TempDir(), "relay.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	route := func(*event.Event) []string { return []string{"bus"} }
	now := time.Now()
	const chunk = 1000
	for i := 0; i < b.N; i += chunk {
		var recs []event.Alarm
		for j := i; j < min(i+chunk, b.N); j++ {
			recs = append(recs, delivertest.Alarm(fmt.Sprintf("bench-%d", j), j%4, event.StatusOngoing, now, time.Time{}))
		}
		if _, err := st.Apply(ctx, store.Batch{Observed: recs}, route); err != nil {
			b.Fatal(err)
		}
	}
	d, err := deliver.NewDeliverer(st, []deliver.Target{{Sink: sink}}, deliver.Options{Clock: clock.Real(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	if err := d.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
