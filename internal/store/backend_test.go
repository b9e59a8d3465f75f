package store

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/natstest"
)

// The store's tests run on both backends: `go test` runs them on bbolt, and
// TestStoreSuiteOnJetStream runs the same binary again with
// RELAY_TEST_STORE_BACKEND=jetstream, where every store of a test keeps its
// state in a three-server JetStream cluster the package shares, and every
// reopen restores the local file from JetStream, as a replica that takes a
// tenant over does.
const backendEnv = "RELAY_TEST_STORE_BACKEND"

// suite is the connection to the shared cluster when the tests run on
// JetStream.
var suite struct {
	nc *nats.Conn

	mu     sync.Mutex
	fences map[string]uint64 // by tenant: the last fence used
}

func TestMain(m *testing.M) {
	if os.Getenv(backendEnv) != "jetstream" {
		os.Exit(m.Run())
	}
	os.Exit(natstest.RunMain(m, 3, func(_ *natstest.Cluster, nc *nats.Conn) {
		suite.nc = nc
		suite.fences = make(map[string]uint64)
	}))
}

// NewJetStream returns the JetStream backend of the suite's stream for
// tenant, held by holder with lease revision fence. This package cannot
// import jsbackend, which imports it: jsbackend_test.go, in package
// store_test of the same test binary, sets it.
var NewJetStream func(nc *nats.Conn, tenant string, fence uint64, holder string) (Backend, error)

// onJetStream reports whether the tests run on the JetStream backend.
func onJetStream() bool { return suite.nc != nil }

// boltOnly skips a test of the local file itself (its lock, its bytes, a
// file of an older schema) when the tests run on JetStream.
func boltOnly(t *testing.T, why string) {
	t.Helper()
	if onJetStream() {
		t.Skip("on the bbolt backend only: " + why)
	}
}

// withBackend returns opts with the backend of the test run for the store
// at path: on JetStream, a new holder of the tenant named after path, with a
// fence above every earlier one.
func withBackend(t testing.TB, path string, opts Options) Options {
	t.Helper()
	if !onJetStream() || opts.Backend != nil {
		return opts
	}
	h := fnv.New64a()
	h.Write([]byte(path))
	tenant := fmt.Sprintf("t%016x", h.Sum64())
	suite.mu.Lock()
	suite.fences[tenant]++
	fence := suite.fences[tenant]
	suite.mu.Unlock()
	b, err := NewJetStream(suite.nc, tenant, fence, fmt.Sprintf("holder-%d", fence))
	if err != nil {
		t.Fatal(err)
	}
	opts.Backend = b
	return opts
}

// TestStoreSuiteOnJetStream runs every test of the package again on the
// JetStream backend, in a cluster of three servers.
func TestStoreSuiteOnJetStream(t *testing.T) {
	if onJetStream() {
		t.Skip("this is the run on JetStream")
	}
	if testing.Short() {
		t.Skip("-short: the store suite runs on bbolt only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"-test.count=1", "-test.timeout=8m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), backendEnv+"=jetstream")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if testing.Verbose() || err != nil {
		t.Log(strings.TrimSpace(out.String()))
	}
	if err != nil {
		t.Fatalf("the store suite on JetStream: %v", err)
	}
}
