// Package testwait waits in real time, in tests, for what a test cannot be
// told of directly: a delivery loop's attempt, a server's state, a replica's
// takeover.
package testwait

import (
	"testing"
	"time"
)

// poll is how often For asks again.
const poll = 10 * time.Millisecond

// For polls cond until it holds, and fails t naming what when it does not
// within limit.
func For(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", limit, what)
		}
		time.Sleep(poll)
	}
}
