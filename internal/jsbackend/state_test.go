package jsbackend

import (
	"context"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/store/storetest"
)

// What the tests feed a store: the records of the store's own tests
// (package storetest), applied through its exported API.
var (
	t0      = storetest.T0
	rec     = storetest.Record
	ongoing = storetest.Ongoing
)

// to routes every event to sinks.
func to(sinks ...string) store.Router { return func(*event.Event) []string { return sinks } }

// apply applies b to s (detected now, on s's clock, when b does not say).
func apply(t *testing.T, s *store.Store, b store.Batch, route store.Router) store.Result {
	t.Helper()
	res, err := s.Apply(context.Background(), b, route)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}
