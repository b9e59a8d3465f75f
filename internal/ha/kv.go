// Package ha coordinates the replicas of relay over NATS JetStream KV
// (docs/design.md §14): a lease per tenant so that one replica at a time
// polls and delivers it, a members bucket and rendezvous hashing that spread
// the tenants over the live replicas, an assigner that acquires, hands over
// and gives up tenants as replicas come and go, and the request budget that
// the replicas of one egress group share.
//
// Every decision that must hold while NATS is unreachable is taken on this
// process's monotonic clock: a replica that cannot renew a lease gives it up
// before the servers can let another replica take it.
package ha

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Default bucket names; the operator may choose others (for example to run
// two relay deployments on one NATS account).
const (
	DefaultLeaseBucket   = "relay-leases"
	DefaultMembersBucket = "relay-members"
	DefaultBudgetBucket  = "relay-budget"
)

// minTTL is the shortest lease TTL accepted: a renewal every TTL/6 must fit
// a round trip to a replicated KV bucket.
const minTTL = time.Second

// How long openBucket waits for an answer before it asks again: the first
// wait, doubled after each silence up to the last.
const (
	firstBucketWait = 250 * time.Millisecond
	maxBucketWait   = 2 * time.Second
)

// openBucket creates the KV bucket of cfg, or updates its configuration to
// cfg when it exists, and returns it.
//
// Replicas started together all find no bucket and all create it, with the
// same configuration. A clustered server answers one of equal creations that
// come together; the others are accepted and never answered. So a creation that
// gets no answer in a short while asks again, waiting twice as long each
// time, until ctx ends; by then the bucket exists, and the update that
// CreateOrUpdateKeyValue tries first is answered at once.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	for wait := firstBucketWait; ; wait = min(2*wait, maxBucketWait) {
		actx, cancel := context.WithTimeout(ctx, wait)
		kv, err := js.CreateOrUpdateKeyValue(actx, cfg)
		unanswered := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return kv, nil
		}
		if !unanswered {
			return nil, fmt.Errorf("ha: KV bucket %s (%d replicas, TTL %v): %w", cfg.Bucket, cfg.Replicas, cfg.TTL, err)
		}
	}
}

// checkBucketConfig checks the settings every bucket of this package has.
func checkBucketConfig(what, bucket string, replicas int, ttl time.Duration) error {
	if !validBucket(bucket) {
		return fmt.Errorf("ha: %s bucket %q: want letters, digits, '-' and '_' only", what, bucket)
	}
	if replicas < 1 || replicas > 5 {
		return fmt.Errorf("ha: %s bucket %s: %d replicas: want 1 to 5", what, bucket, replicas)
	}
	if ttl < minTTL {
		return fmt.Errorf("ha: %s bucket %s: TTL %v: want at least %v", what, bucket, ttl, minTTL)
	}
	return nil
}

func validBucket(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// checkKey says why s cannot be a key of a KV bucket, naming it as what
// (a tenant id, a replica id), or returns nil.
func checkKey(what, s string) error {
	ok := s != "" && !strings.HasPrefix(s, ".") && !strings.HasSuffix(s, ".") && !strings.Contains(s, "..")
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=/.", r)) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("ha: %s %q cannot be a KV key: use letters, digits and - _ = / . (not at either end, never two dots in a row)", what, s)
	}
	return nil
}

// isConflict reports whether err says that a compare-and-set write lost: the
// key exists (Create), or its revision is not the one expected (Update,
// Delete). Replicated buckets answer error code 10164 where a single server
// answers 10071, and Create after a delete marker returns the server's error
// unmapped, so the codes are checked as well as the sentinels.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
