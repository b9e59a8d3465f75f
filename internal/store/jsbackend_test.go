package store_test

import (
	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/jsbackend"
	"github.com/relay-energy/relay/internal/store"
)

// The store's tests run on JetStream (backend_test.go) through this
// package's backend, which this external test file hands them.
func init() {
	store.NewJetStream = func(nc *nats.Conn, tenant string, fence uint64, holder string) (store.Backend, error) {
		return jsbackend.New(nc, jsbackend.Options{
			// The suite's stream has one replica, on one server of the
			// three: the suite checks what the store does, and a replicated
			// stream answers the same, three times slower under -race. The
			// tests of the backend itself (package jsbackend) use the
			// default stream, with three replicas.
			Stream: "RELAY_STATE_SUITE", Prefix: "relay.suite", Replicas: 1,
			Tenant: tenant, Fence: fence, Holder: holder,
			// Small, so that the tests snapshot and purge too.
			SnapshotAfter: 64 << 10,
		})
	}
}
