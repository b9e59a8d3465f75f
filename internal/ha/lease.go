package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Errors a caller of Acquire and Lease.Err branches on.
var (
	// ErrHeld is returned by Acquire when another holder has the lease.
	ErrHeld = errors.New("held by another replica")
	// ErrLost is the cause of a lease that ended without Release: a
	// renewal was refused because another holder wrote the key, or no
	// renewal succeeded in time.
	ErrLost = errors.New("lease lost")
	// ErrReleased is the cause of a lease that Release ended.
	ErrReleased = errors.New("lease released")
)

// The timing of a lease, as fractions of its TTL (docs/design.md §14).
const (
	// renewDivisor: a holder renews every TTL/6.
	renewDivisor = 6
	// marginDivisor: a holder gives its lease up when no renewal sent in
	// the last TTL − TTL/3 succeeded, TTL/3 before the servers could expire
	// it; that third is the time the tenant has to stop.
	marginDivisor = 3
	// retryDivisor: after a failed renewal the next is tried TTL/30 later.
	retryDivisor = 30
)

// LeaseConfig configures the leases of one process.
type LeaseConfig struct {
	// Bucket is the KV bucket of the leases, one key per tenant; default
	// DefaultLeaseBucket.
	Bucket string
	// Replicas is the bucket's replication factor, 1 to 5; default 1.
	Replicas int
	// TTL is how long a lease outlives its last renewal on the servers; it
	// is the bucket's TTL. At least 1s.
	TTL time.Duration
	// Holder names this process (the replica id) in the leases it holds.
	Holder string
	// Logger receives the lease's log lines; default none.
	Logger *slog.Logger
}

// Leases acquires tenants' leases in one KV bucket. It is safe for
// concurrent use.
type Leases struct {
	kv     jetstream.KeyValue
	bucket string
	holder string
	ttl    time.Duration
	log    *slog.Logger
}

// OpenLeases creates the lease bucket of cfg, or brings an existing one to
// cfg's TTL and replicas, and returns the leases of cfg.Holder in it.
func OpenLeases(ctx context.Context, js jetstream.JetStream, cfg LeaseConfig) (*Leases, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultLeaseBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if err := checkBucketConfig("lease", cfg.Bucket, cfg.Replicas, cfg.TTL); err != nil {
		return nil, err
	}
	if err := checkKey("replica id", cfg.Holder); err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "relay: one lease per tenant, held by the replica that polls it",
		History:     1,
		TTL:         cfg.TTL,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Leases{kv: kv, bucket: cfg.Bucket, holder: cfg.Holder, ttl: cfg.TTL, log: log}, nil
}

// TTL returns the lease TTL.
func (ls *Leases) TTL() time.Duration { return ls.ttl }

// leaseValue is what a lease key holds: who holds it since when, for
// operators reading the bucket. Nothing in it is secret.
type leaseValue struct {
	Holder   string `json:"holder"`
	Acquired string `json:"acquired"`
}

// Acquire takes the lease of tenant if nobody holds it: the key is absent,
// deleted by a Release, or expired. It returns an error wrapping ErrHeld
// when another holder has it, and for a moment after a release too: Create
// reads the delete marker from any replica of the bucket, and a follower
// may not have it yet. ctx bounds the acquisition only: the lease
// lives, renewed in the background, until it is lost or released, and the
// caller must call Release in either case.
func (ls *Leases) Acquire(ctx context.Context, tenant string) (*Lease, error) {
	if err := checkKey("tenant id", tenant); err != nil {
		return nil, err
	}
	sent := time.Now()
	value, err := json.Marshal(leaseValue{Holder: ls.holder, Acquired: sent.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return nil, fmt.Errorf("ha: lease %s/%s: %w", ls.bucket, tenant, err)
	}
	rev, err := ls.kv.Create(ctx, tenant, value)
	if isConflict(err) {
		return nil, fmt.Errorf("ha: lease %s/%s: %w", ls.bucket, tenant, ErrHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("ha: lease %s/%s: acquiring: %w", ls.bucket, tenant, err)
	}
	validUntil := sent.Add(ls.ttl - ls.ttl/marginDivisor)
	if took := time.Since(sent); !time.Now().Before(validUntil) {
		// The answer came too late for the lease to be of use: the servers
		// may let another replica acquire it before the tenant could stop.
		_ = ls.kv.Delete(ctx, tenant, jetstream.LastRevision(rev))
		return nil, fmt.Errorf("ha: lease %s/%s: acquiring took %v, longer than the lease is valid without a renewal (%v)",
			ls.bucket, tenant, took.Round(time.Millisecond), ls.ttl-ls.ttl/marginDivisor)
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCtx, stop := context.WithCancel(context.Background())
	l := &Lease{
		ls:         ls,
		tenant:     tenant,
		value:      value,
		token:      rev,
		ctx:        lctx,
		cancel:     cancel,
		stop:       stop,
		stopped:    make(chan struct{}),
		rev:        rev,
		validUntil: validUntil,
	}
	go l.renew(stopCtx)
	ls.log.Debug("lease acquired", "bucket", ls.bucket, "tenant", tenant, "token", rev)
	return l, nil
}

// Lease is one tenant's lease held by this process. While it is held, a
// background goroutine renews it every TTL/6; when no renewal succeeds in
// time or another holder wrote the key, the lease is lost: Done closes and
// Context is cancelled before the servers can let another replica acquire
// it. Its methods are safe for concurrent use.
type Lease struct {
	ls     *Leases
	tenant string
	value  []byte
	token  uint64

	ctx    context.Context
	cancel context.CancelCauseFunc
	// stop ends the renewal goroutine, which closes stopped.
	stop    context.CancelFunc
	stopped chan struct{}

	releaseOnce sync.Once
	releaseErr  error

	mu sync.Mutex
	// rev is the revision of the key this lease last wrote.
	rev uint64
	// validUntil is when the lease is given up unless a renewal sent
	// before then succeeds: the send time of the last successful write
	// plus TTL − TTL/3, on the monotonic clock.
	validUntil time.Time
}

// Tenant returns the tenant id the lease is for.
func (l *Lease) Tenant() string { return l.tenant }

// Token returns the fencing token: the revision at which this lease was
// acquired. It stays the same while the lease is held, and it is larger
// than the token of every earlier holder of any lease in the bucket, since
// revisions are the sequence numbers of the bucket's stream.
func (l *Lease) Token() uint64 { return l.token }

// Revision returns the revision of the key the lease last wrote: the token
// after Acquire, then the revision of the latest renewal.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Done returns a channel that is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context returns a context that is cancelled when the lease is lost or
// released: the context to run the tenant under. It carries the values of
// the context given to Acquire.
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease is held; afterwards an error wrapping
// ErrLost, saying why, or ErrReleased.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Check returns nil while the lease is held and valid on this process's
// monotonic clock: less than TTL − TTL/3 has passed since the send of its last
// successful write. Past that instant the lease is lost, and Check loses it at
// once, without waiting for the renewal goroutine, and returns Err: a process
// paused past its lease (SIGSTOP, a VM frozen, a long stop of the world) finds
// it gone at the first Check after it resumes, whichever of its goroutines
// runs first. Call it immediately before anything only the holder may do,
// such as a message to a sink. A pause between Check and the wire still lets
// that one message go out late; nothing on this side can recall it.
func (l *Lease) Check() error {
	if err := l.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	until := l.validUntil
	l.mu.Unlock()
	// Both times carry the monotonic reading, which Before compares: a
	// step of the wall clock changes nothing.
	if time.Now().Before(until) {
		return nil
	}
	ttl := l.ls.ttl
	l.lose(fmt.Errorf("ha: lease %s/%s: %w: no renewal succeeded within %v", l.ls.bucket, l.tenant, ErrLost, ttl-ttl/marginDivisor))
	return l.Err()
}

// renew renews the lease until stopCtx ends or the lease is lost.
func (l *Lease) renew(stopCtx context.Context) {
	defer close(l.stopped)
	ttl := l.ls.ttl
	every, retry := ttl/renewDivisor, max(ttl/retryDivisor, 10*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	// after sets the timer to d from now, or to the end of the lease's
	// validity if that comes first, when the loop finds it lost.
	after := func(d time.Duration) {
		l.mu.Lock()
		until := l.validUntil
		l.mu.Unlock()
		t.Reset(min(d, time.Until(until)))
	}
	after(every)
	for {
		select {
		case <-stopCtx.Done():
			return
		case <-l.ctx.Done():
			// Lost by Check: a lost lease is not renewed.
			return
		case <-t.C:
		}
		l.mu.Lock()
		rev, until := l.rev, l.validUntil
		l.mu.Unlock()
		sent := time.Now()
		if !sent.Before(until) {
			l.lose(fmt.Errorf("ha: lease %s/%s: %w: no renewal succeeded within %v", l.ls.bucket, l.tenant, ErrLost, ttl-ttl/marginDivisor))
			return
		}
		// The request may run until the lease is given up, no longer: its
		// answer after that would come too late to count.
		rctx, cancel := context.WithDeadline(stopCtx, until)
		newRev, err := l.ls.kv.Update(rctx, l.tenant, l.value, rev)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.rev, l.validUntil = newRev, sent.Add(ttl-ttl/marginDivisor)
			l.mu.Unlock()
			after(every)
		case stopCtx.Err() != nil:
			return
		case isConflict(err):
			l.lose(fmt.Errorf("ha: lease %s/%s: %w: its key was written or removed by another (%v)", l.ls.bucket, l.tenant, ErrLost, err))
			return
		default:
			left := time.Until(until)
			if left <= 0 {
				l.lose(fmt.Errorf("ha: lease %s/%s: %w: no renewal succeeded within %v (last: %v)", l.ls.bucket, l.tenant, ErrLost, ttl-ttl/marginDivisor, err))
				return
			}
			l.ls.log.Debug("lease renewal failed; retrying", "bucket", l.ls.bucket, "tenant", l.tenant, "err", err, "left", left)
			after(retry)
		}
	}
}

// lose ends the lease with cause. Whoever runs the tenant logs it, from
// Err; here it is a debug line.
func (l *Lease) lose(cause error) {
	l.ls.log.Debug("lease lost", "bucket", l.ls.bucket, "tenant", l.tenant, "err", cause)
	l.cancel(cause)
}

// Release ends the lease: it stops renewing, cancels Context, and deletes
// the key if it still holds the revision this lease wrote last, so that the
// next holder need not wait for the TTL. Call it once the tenant has stopped.
// A lost lease is released too; its key is deleted only if the loss was a
// failure to renew and this lease's write is still the latest. Release
// returns nil when there was nothing to delete; later calls return what the
// first returned.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.stop()
		<-l.stopped
		wasLost := errors.Is(l.Err(), ErrLost)
		l.cancel(ErrReleased)
		l.releaseErr = l.deleteKey(ctx, wasLost)
	})
	return l.releaseErr
}

func (l *Lease) deleteKey(ctx context.Context, lost bool) error {
	rev := l.Revision()
	err := l.ls.kv.Delete(ctx, l.tenant, jetstream.LastRevision(rev))
	if isConflict(err) {
		// A renewal abandoned at its deadline may have been written after
		// all: the key then holds this lease's value at a revision it never
		// learnt. Anything else is another holder's.
		e, gerr := l.ls.kv.Get(ctx, l.tenant)
		if gerr != nil || !bytes.Equal(e.Value(), l.value) {
			return nil
		}
		err = l.ls.kv.Delete(ctx, l.tenant, jetstream.LastRevision(e.Revision()))
		if isConflict(err) {
			return nil
		}
	}
	if err != nil {
		if lost {
			// The servers expire it within the TTL anyway.
			return nil
		}
		return fmt.Errorf("ha: lease %s/%s: releasing: %w", l.ls.bucket, l.tenant, err)
	}
	l.ls.log.Debug("lease released", "bucket", l.ls.bucket, "tenant", l.tenant)
	return nil
}
