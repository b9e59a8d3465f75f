package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/opendata"
)

// BudgetConfig configures the request budget shared by the replicas of one
// egress group.
type BudgetConfig struct {
	// Bucket is the KV bucket of the budgets; default DefaultBudgetBucket.
	Bucket string
	// Replicas is the bucket's replication factor, 1 to 5; default 1.
	Replicas int
	// Group is the egress group: the replicas that reach the upstream from
	// one IP. Letters, digits, '-' and '_'.
	Group string
	// BaseURL is the upstream's base URL; the budget is per upstream host.
	BaseURL string
	// Bidder names the tenant whose requests reserve here, among the
	// group's (its tenant id): its bid is kept under this name. Empty:
	// the requests bid nothing and are served first come, first served.
	Bidder string
	// Timeout bounds each reservation, every KV call it makes included;
	// default 2s. A reservation that runs out of it fails, and the client
	// goes on within its own budget. The reservation that finds no bucket
	// and creates it waits up to 10s for that.
	Timeout time.Duration
}

// budgetBucketTTL is how long a budget key outlives its last write: a start
// older than the window and its margin (61 s) holds no slot.
const budgetBucketTTL = 2 * time.Minute

// createTimeout bounds how long a reservation waits for the budget bucket to
// be created.
const createTimeout = 10 * time.Second

// maxCASAttempts bounds how often one reservation re-reads the key after
// another replica wrote it in between.
const maxCASAttempts = 32

// bidTTL is how long a bid counts after the time its bidder said it would
// ask again (when a slot frees, or bidRetry later while a better bid takes
// the free one): a bid older than that is of a request that went away (its
// context ended, its replica stopped).
const (
	bidTTL   = 3 * time.Second
	bidRetry = 250 * time.Millisecond
)

// Budget is an opendata.SharedBudget in a KV bucket: one key per egress group
// and upstream host holding the request starts of the last window, updated
// by compare-and-set, so that the replicas of the group together stay within
// the upstream's limit per IP. The bucket is created or opened at the first
// reservation, so a process starts while NATS is away. It is safe for
// concurrent use.
type Budget struct {
	js       jetstream.JetStream
	bucket   string
	replicas int
	key      string
	bidder   string
	timeout  time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue
	// unrecorded holds the starts the client made on its own budget after
	// a reservation failed, oldest first; the next reservation that
	// reaches the key records them, so that the others count them.
	unrecorded []time.Time
}

var _ opendata.SharedBudget = (*Budget)(nil)

// NewBudget checks cfg and returns the shared budget of cfg's group and
// upstream. It does not contact NATS.
func NewBudget(js jetstream.JetStream, cfg BudgetConfig) (*Budget, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBudgetBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if err := checkBucketConfig("budget", cfg.Bucket, cfg.Replicas, budgetBucketTTL); err != nil {
		return nil, err
	}
	if !validBucket(cfg.Group) {
		return nil, fmt.Errorf("ha: egress group %q: want letters, digits, '-' and '_' only", cfg.Group)
	}
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("ha: shared budget of egress group %s: base URL %q has no host", cfg.Group, cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	// The host may carry a port, which a key cannot hold; its hash can.
	// The scheme's default port written out is the same address.
	h := fnv.New64a()
	h.Write([]byte(opendata.AddressKey(cfg.BaseURL)))
	return &Budget{
		js:       js,
		bucket:   cfg.Bucket,
		replicas: cfg.Replicas,
		key:      cfg.Group + "." + strconv.FormatUint(h.Sum64(), 16),
		bidder:   cfg.Bidder,
		timeout:  cfg.Timeout,
	}, nil
}

// String names the budget's bucket and key, as logs show it.
func (b *Budget) String() string { return b.bucket + "/" + b.key }

// Reserve implements opendata.SharedBudget: it reads the starts the group
// recorded, and when opendata.AdmitStart admits one at now and no other
// bidder's live bid beats bid, writes them back with now added,
// conditional on the revision read; a write that loses to another
// replica's reads again. A request that must wait leaves its bid in the
// bids' key beside it (the starts' key stays the bare array of starts that
// a relay before bids reads), so that when a slot frees the group's most
// urgent request takes it,
// whichever replica it is on (docs/design.md §14, "One budget per egress
// group"). After a failure the client starts its request anyway (on its
// own budget): that start is recorded with the next reservation that
// succeeds.
func (b *Budget) Reserve(ctx context.Context, now time.Time, limit int, bid opendata.Bid) (time.Duration, error) {
	wait, err := b.reserve(ctx, now, limit, bid)
	if err != nil && ctx.Err() == nil {
		b.mu.Lock()
		// Starts older than the bucket's TTL hold no slot any more: an
		// outage of any length keeps this list short.
		keep := slices.IndexFunc(b.unrecorded, func(s time.Time) bool { return s.Add(budgetBucketTTL).After(now) })
		if keep < 0 {
			keep = len(b.unrecorded)
		}
		b.unrecorded = append(b.unrecorded[keep:], now)
		b.mu.Unlock()
	}
	return wait, err
}

func (b *Budget) reserve(ctx context.Context, now time.Time, limit int, bid opendata.Bid) (time.Duration, error) {
	kv, err := b.open(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	b.mu.Lock()
	unrecorded := slices.Clone(b.unrecorded)
	b.mu.Unlock()
	for range maxCASAttempts {
		e, rev, err := b.get(ctx, kv, b.key)
		if err != nil {
			return 0, err
		}
		var v budgetValue
		if rev != 0 {
			if v, err = decodeBudget(e); err != nil {
				return 0, fmt.Errorf("ha: shared budget %s: revision %d: %w", b, rev, err)
			}
		}
		var (
			bids budgetValue
			brev uint64
		)
		if b.bidder != "" {
			// The bids live in a key of their own, so that the starts'
			// key stays what a relay before bids reads.
			be, r, err := b.get(ctx, kv, b.bidsKey())
			if err != nil {
				return 0, err
			}
			if brev = r; brev != 0 {
				if bids, err = decodeBudget(be); err != nil {
					// Unreadable bids order nothing; the next write
					// replaces them.
					bids = budgetValue{}
				}
			}
			// A key written by a relay of the first version with bids
			// holds them beside its starts.
			for name, r := range v.Bids {
				if _, ok := bids.Bids[name]; !ok {
					bids.setRecord(name, r)
				}
			}
		}
		live, wait := opendata.AdmitStart(append(v.starts(), unrecorded...), now, limit)
		if wait == 0 && b.outbid(bids, now, bid) {
			wait = bidRetry
		}
		if wait > 0 {
			// The unrecorded starts are left for a later reservation. The
			// bid stays in the bids' key while the request waits,
			// refreshed; a bid that cannot be written leaves the request
			// waiting all the same.
			until := now.Add(wait + bidTTL)
			if b.bidder == "" || bids.bidFresh(b.bidder, until, bid) {
				return wait, nil
			}
			bids.setBid(b.bidder, until, bid)
			bids.dropStale(now)
			if err := b.put(ctx, kv, b.bidsKey(), bids.encodeBids(), brev); err != nil && isConflict(err) {
				continue
			}
			return wait, nil
		}
		if err := b.put(ctx, kv, b.key, encodeStarts(live), rev); err != nil {
			if isConflict(err) {
				continue
			}
			return 0, fmt.Errorf("ha: shared budget %s: recording a start: %w", b, err)
		}
		if len(unrecorded) > 0 {
			b.forget(unrecorded)
		}
		if _, ok := bids.Bids[b.bidder]; ok && brev != 0 {
			b.withdraw(ctx, kv, now)
		}
		return 0, nil
	}
	return 0, fmt.Errorf("ha: shared budget %s: %d writes in a row lost to other replicas' writes", b, maxCASAttempts)
}

// bidsKey is the key of the bids for b's key.
func (b *Budget) bidsKey() string { return b.key + ".bids" }

// get reads key, with its revision (0 when it is absent).
func (b *Budget) get(ctx context.Context, kv jetstream.KeyValue, key string) ([]byte, uint64, error) {
	e, err := kv.Get(ctx, key)
	for errors.Is(err, nats.ErrNoResponders) {
		// A bucket just created, or a replica of it moving, serves
		// reads a moment later.
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, fmt.Errorf("ha: shared budget %s: reading: %w", b, err)
		case <-t.C:
		}
		e, err = kv.Get(ctx, key)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("ha: shared budget %s: reading: %w", b, err)
	}
	return e.Value(), e.Revision(), nil
}

// put writes value to key at revision rev (creating it when rev is 0).
func (b *Budget) put(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, rev uint64) error {
	var err error
	if rev == 0 {
		_, err = kv.Create(ctx, key, value)
	} else {
		_, err = kv.Update(ctx, key, value, rev)
	}
	return err
}

// withdraw removes b's bid once its request took a slot, so that it does
// not keep the next free slot from the others; a bid it fails to remove
// stops counting bidTTL after its request would have asked again.
func (b *Budget) withdraw(ctx context.Context, kv jetstream.KeyValue, now time.Time) {
	for range maxCASAttempts {
		be, rev, err := b.get(ctx, kv, b.bidsKey())
		if err != nil || rev == 0 {
			return
		}
		bids, err := decodeBudget(be)
		if err != nil {
			return
		}
		if _, ok := bids.Bids[b.bidder]; !ok {
			return
		}
		delete(bids.Bids, b.bidder)
		bids.dropStale(now)
		if err := b.put(ctx, kv, b.bidsKey(), bids.encodeBids(), rev); err == nil || !isConflict(err) {
			return
		}
	}
}

// forget drops recorded from the unrecorded starts; another reservation may
// have changed the list meanwhile.
func (b *Budget) forget(recorded []time.Time) {
	n := map[int64]int{}
	for _, s := range recorded {
		n[s.UnixNano()]++
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unrecorded = slices.DeleteFunc(b.unrecorded, func(s time.Time) bool {
		if n[s.UnixNano()] > 0 {
			n[s.UnixNano()]--
			return true
		}
		return false
	})
}

// open returns the bucket, binding to it at the first call that reaches
// NATS. When NATS answers that the bucket does not exist, it creates it and
// waits up to createTimeout for that: the budget is not shared until then,
// and a replica of a group that starts for the first time should not go out
// unshared for it.
func (b *Budget) open(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	kv := b.kv
	b.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	bind := func() (jetstream.KeyValue, error) {
		bctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return b.js.KeyValue(bctx, b.bucket)
	}
	kv, err := bind()
	created := false // err, if any, is openBucket's, which names the bucket
	for deadline := time.Now().Add(createTimeout); errors.Is(err, jetstream.ErrBucketNotFound); {
		created = true
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		kv, err = openBucket(cctx, b.js, jetstream.KeyValueConfig{
			Bucket:      b.bucket,
			Description: "relay: the upstream request starts of each egress group's last minute",
			History:     1,
			TTL:         budgetBucketTTL,
			Replicas:    b.replicas,
		})
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		// Replicas that create the bucket at once may all time out while
		// the servers do create it.
		kv, err = bind()
		created = false
	}
	if err != nil && created {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("ha: shared budget %s: opening its bucket: %w", b, err)
	}
	b.mu.Lock()
	b.kv = kv
	b.mu.Unlock()
	return kv, nil
}

// budgetValue is what a budget key and its bids' key hold: the starts of
// the last window in epoch milliseconds (the budget key, a bare JSON array
// as every relay reads it), and the bids of the requests waiting for a slot
// by bidder (the bids' key, {"bids": {...}}). A budget key written by the
// first relay with bids is an object of both.
type budgetValue struct {
	Starts []int64              `json:"starts"`
	Bids   map[string]bidRecord `json:"bids,omitempty"`
}

// bidRecord is one bidder's bid and until when (epoch ms) it counts.
type bidRecord struct {
	OverdueMs int64   `json:"overdue_ms,omitempty"`
	Backlog   float64 `json:"backlog"`
	Until     int64   `json:"until"`
}

func (r bidRecord) bid() opendata.Bid {
	return opendata.Bid{Overdue: time.Duration(r.OverdueMs) * time.Millisecond, Backlog: r.Backlog}
}

func (v *budgetValue) starts() []time.Time {
	out := make([]time.Time, len(v.Starts))
	for i, m := range v.Starts {
		out[i] = time.UnixMilli(m)
	}
	return out
}

func (v *budgetValue) setStarts(starts []time.Time) {
	v.Starts = make([]int64, len(starts))
	for i, s := range starts {
		v.Starts[i] = s.UnixMilli()
	}
}

// live reports whether r counts at now.
func (r bidRecord) live(now time.Time) bool { return now.Before(time.UnixMilli(r.Until)) }

// outbid reports whether another bidder's live bid beats bid at now.
func (b *Budget) outbid(v budgetValue, now time.Time, bid opendata.Bid) bool {
	if b.bidder == "" {
		return false
	}
	for name, r := range v.Bids {
		if name != b.bidder && r.live(now) && r.bid().Beats(bid) {
			return true
		}
	}
	return false
}

// bidFresh reports whether bidder's bid in v is bid and counts until within
// half of bidTTL of until: writing it again would change nothing the
// others need.
func (v *budgetValue) bidFresh(bidder string, until time.Time, bid opendata.Bid) bool {
	r, ok := v.Bids[bidder]
	return ok && r.bid() == bid && !time.UnixMilli(r.Until).Before(until.Add(-bidTTL/2))
}

func (v *budgetValue) setBid(bidder string, until time.Time, bid opendata.Bid) {
	if v.Bids == nil {
		v.Bids = map[string]bidRecord{}
	}
	v.Bids[bidder] = bidRecord{OverdueMs: bid.Overdue.Milliseconds(), Backlog: bid.Backlog, Until: until.UnixMilli()}
}

// dropStale removes the bids that no longer count.
func (v *budgetValue) dropStale(now time.Time) {
	for name, r := range v.Bids {
		if !r.live(now) {
			delete(v.Bids, name)
		}
	}
}

// encodeStarts writes starts as the value of a budget key: a JSON array of
// epoch milliseconds, as every relay reads it.
func encodeStarts(starts []time.Time) []byte {
	ms := make([]int64, len(starts))
	for i, s := range starts {
		ms[i] = s.UnixMilli()
	}
	out, _ := json.Marshal(ms) // a slice of int64 always marshals
	return out
}

// encodeBids writes v's bids as the value of a bids key; a backlog that is
// not a finite number is written as the largest one.
func (v budgetValue) encodeBids() []byte {
	for name, r := range v.Bids {
		if math.IsNaN(r.Backlog) || math.IsInf(r.Backlog, 0) {
			r.Backlog = math.MaxFloat64
			v.Bids[name] = r
		}
	}
	out, _ := json.Marshal(budgetValue{Bids: v.Bids})
	return out
}

func (v *budgetValue) setRecord(name string, r bidRecord) {
	if v.Bids == nil {
		v.Bids = map[string]bidRecord{}
	}
	v.Bids[name] = r
}

// decodeBudget reads a budget key's value: an object of starts and bids, or
// the bare array of starts of a relay before bids.
func decodeBudget(value []byte) (budgetValue, error) {
	var v budgetValue
	if bytes.HasPrefix(bytes.TrimSpace(value), []byte("[")) {
		if err := json.Unmarshal(value, &v.Starts); err != nil {
			return v, fmt.Errorf("the value is not a JSON array of epoch milliseconds: %w", err)
		}
		return v, nil
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return v, fmt.Errorf("the value is not a JSON object of starts and bids: %w", err)
	}
	return v, nil
}
