package guard

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The throttle's buckets: a client address may fail PerAddressBurst times,
// then once per PerAddressEvery; all clients together OverallBurst times,
// then once per OverallEvery. A token of 16 characters or more cannot be
// guessed at these rates; a person who mistyped waits seconds.
const (
	PerAddressBurst = 5
	PerAddressEvery = 6 * time.Second
	OverallBurst    = 60
	OverallEvery    = time.Second
)

// maxAddresses bounds the addresses the throttle keeps a bucket for: at
// the bound, those whose bucket has refilled are forgotten; while none
// has, a new address shares one overflow bucket with every other new
// address. An address that gave the right token lately (up to maxKnown of
// them) always has a bucket of its own.
const (
	maxAddresses = 10000
	maxKnown     = 1000
)

// KnownFor is how long an address that gave the right token stays known:
// while its own bucket is full, the overall bucket does not hold it back.
const KnownFor = 24 * time.Hour

// Throttle slows down the guessing of tokens. Each attempt takes a token
// from the bucket of its client's address (an IPv6 address's /64) and one
// from the overall bucket before its token is checked, and a right token
// gives them back: attempts sent in parallel cannot all be checked before
// the first wrong one counts. While an address's bucket is empty, every
// attempt from it, with the right token or not, is refused (429 with
// Retry-After), so that guessing cannot go on at its own pace; while the
// overall bucket is empty, every attempt is refused but those of an address
// that gave the right token within KnownFor and no wrong one since its
// bucket last refilled: guessing from many addresses, new ones each time,
// is held to OverallEvery, and cannot lock the control room's operators or
// a relay command out in the middle of an incident, though an operator's
// first login from a new address waits its turn then. One Throttle serves
// the console's logins and the ops API's Bearer checks of a process. Its
// memory is bounded (maxAddresses, maxKnown).
type Throttle struct {
	now     func() time.Time
	log     *slog.Logger
	refused *prometheus.CounterVec

	mu       sync.Mutex
	overall  bucket
	overflow bucket
	byAddr   map[netip.Prefix]*bucket
	known    map[netip.Prefix]time.Time
	forgotAt time.Time    // the last walk of byAddr for full buckets
	warned   [2]time.Time // the last warnings of one client's and of all clients' wrong tokens
}

// warnEvery spaces the throttle's warnings: guessing from many addresses
// logs once a minute, not once per address.
const warnEvery = time.Minute

// bucket is a token bucket: tokens at the time at.
type bucket struct {
	tokens float64
	at     time.Time
}

// fill brings b to now and returns its tokens.
func (b *bucket) fill(now time.Time, burst int, every time.Duration) float64 {
	b.tokens = math.Min(float64(burst), b.tokens+float64(now.Sub(b.at))/float64(every))
	b.at = now
	return b.tokens
}

// wait is how long b needs to hold one token.
func (b *bucket) wait(every time.Duration) time.Duration {
	return time.Duration((1 - b.tokens) * float64(every))
}

// NewThrottle returns a throttle with full buckets that tells the time
// with now (nil: the wall clock), logs a warning when a client is first
// refused, and counts refusals in relay_auth_throttled_total of reg (nil:
// not counted).
func NewThrottle(now func() time.Time, log *slog.Logger, reg prometheus.Registerer) *Throttle {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Throttle{now: now, log: log,
		byAddr:   map[netip.Prefix]*bucket{},
		known:    map[netip.Prefix]time.Time{},
		overall:  bucket{tokens: OverallBurst, at: now()},
		overflow: bucket{tokens: PerAddressBurst, at: now()},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_auth_throttled_total",
			Help: "Attempts to log in to the console or call the ops API refused with 429 because their client, or all clients, gave too many wrong tokens.",
		}, []string{"endpoint"}),
	}
	if reg != nil {
		reg.MustRegister(t.refused)
	}
	return t
}

// key is what a client address is throttled by: the address, or its /64
// for IPv6, where one client holds a whole /64. Text that is no address
// (a peer on a Unix socket) is the zero Prefix: one bucket for all of it.
func key(addr string) netip.Prefix {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// Attempt is one check of a token that Allow let through: what it took
// from the buckets until Right or Wrong says how the check went.
type Attempt struct {
	t              *Throttle
	k              netip.Prefix
	b              *bucket
	tookOverall    bool
	addr, endpoint string
	done           bool
}

// Allow reports whether an attempt from the client at addr may check its
// token now, and takes its tokens: the caller says how the check went with
// the Attempt's Right or Wrong. When not, it says how long to wait and
// counts the refusal under endpoint.
func (t *Throttle) Allow(addr, endpoint string) (*Attempt, time.Duration, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key(addr)
	b := t.bucketOf(k, now)
	var wait time.Duration
	full := b.fill(now, PerAddressBurst, PerAddressEvery) >= PerAddressBurst
	if b.tokens < 1 {
		wait = b.wait(PerAddressEvery)
	}
	known, ok := t.known[k]
	exempt := full && ok && now.Sub(known) < KnownFor
	if t.overall.fill(now, OverallBurst, OverallEvery) < 1 && !exempt {
		wait = max(wait, t.overall.wait(OverallEvery))
	}
	if wait > 0 {
		t.refused.WithLabelValues(endpoint).Inc()
		return nil, wait, false
	}
	b.tokens--
	if !exempt {
		t.overall.tokens--
	}
	return &Attempt{t: t, k: k, b: b, tookOverall: !exempt, addr: addr, endpoint: endpoint}, 0, true
}

// bucketOf returns the bucket of the address k, making one when it has
// none: its own while there is room or k is known, else the overflow.
func (t *Throttle) bucketOf(k netip.Prefix, now time.Time) *bucket {
	if b := t.byAddr[k]; b != nil {
		return b
	}
	if len(t.byAddr) >= maxAddresses && now.Sub(t.forgotAt) >= time.Second {
		t.forgotAt = now // a flood of new addresses walks the map once a second, not once each
		t.forget(now)
	}
	if _, known := t.known[k]; len(t.byAddr) >= maxAddresses && !known {
		return &t.overflow
	}
	b := &bucket{tokens: PerAddressBurst, at: now}
	t.byAddr[k] = b
	return b
}

// forget drops the addresses whose bucket is full again, unless they are
// known: a bucket that is not full holds the wrong tokens of lately.
func (t *Throttle) forget(now time.Time) {
	for k, b := range t.byAddr {
		if _, known := t.known[k]; !known && b.fill(now, PerAddressBurst, PerAddressEvery) >= PerAddressBurst {
			delete(t.byAddr, k)
		}
	}
}

// Right records that the attempt's token was right: it gives back the
// tokens Allow took and makes its address known for KnownFor.
func (a *Attempt) Right() {
	a.settle(func(t *Throttle, now time.Time) {
		a.giveBack(now)
		if _, known := t.known[a.k]; !known && len(t.known) >= maxKnown {
			t.forgetKnown(now)
		}
		t.known[a.k] = now
		if a.b != &t.overflow {
			t.byAddr[a.k] = a.b // known addresses keep their bucket past the bound
		}
	})
}

// settle runs fn, under the throttle's lock, the first time the attempt
// is settled (Right, Wrong or Release), and never again.
func (a *Attempt) settle(fn func(t *Throttle, now time.Time)) {
	if a == nil {
		return
	}
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.done {
		return
	}
	a.done = true
	fn(t, t.now())
}

// Release gives back the tokens Allow took, unless Right or Wrong said
// how the check went: for a request that never reached its token's check
// (a path that does not exist, administration turned off). It does not make
// the address known: only a right token does.
func (a *Attempt) Release() {
	a.settle(func(_ *Throttle, now time.Time) { a.giveBack(now) })
}

// giveBack returns the tokens Allow took; t.mu is held.
func (a *Attempt) giveBack(now time.Time) {
	t := a.t
	a.b.fill(now, PerAddressBurst, PerAddressEvery)
	a.b.tokens = math.Min(PerAddressBurst, a.b.tokens+1)
	if a.tookOverall {
		t.overall.fill(now, OverallBurst, OverallEvery)
		t.overall.tokens = math.Min(OverallBurst, t.overall.tokens+1)
	}
}

type attemptKey struct{}

// WithAttempt returns ctx carrying a, for the handler that checks the
// token (AttemptOf) to say how the check went.
func WithAttempt(ctx context.Context, a *Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// AttemptOf returns the Attempt ctx carries, or nil (whose methods do
// nothing).
func AttemptOf(ctx context.Context) *Attempt {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	return a
}

// forgetKnown drops the addresses known longer than KnownFor, and the one
// known longest if that leaves the set at its bound.
func (t *Throttle) forgetKnown(now time.Time) {
	var oldest netip.Prefix
	var at time.Time
	for k, since := range t.known {
		if now.Sub(since) >= KnownFor {
			delete(t.known, k)
		} else if at.IsZero() || since.Before(at) {
			oldest, at = k, since
		}
	}
	if len(t.known) >= maxKnown {
		delete(t.known, oldest)
	}
}

// Wrong records that the attempt's token was wrong: the tokens Allow took
// stay taken, and the first time a bucket runs out a warning is logged.
func (a *Attempt) Wrong() {
	a.settle(func(t *Throttle, now time.Time) {
		switch {
		case a.b.fill(now, PerAddressBurst, PerAddressEvery) < 1 && now.Sub(t.warned[0]) >= warnEvery:
			t.warned[0] = now
			t.log.Warn("too many wrong tokens from one client: its attempts are refused with 429 for a while (said at most once a minute)",
				"endpoint", a.endpoint, "client", a.addr, "retry_after", a.b.wait(PerAddressEvery).Round(time.Second))
		case a.tookOverall && t.overall.fill(now, OverallBurst, OverallEvery) < 1 && now.Sub(t.warned[1]) >= warnEvery:
			t.warned[1] = now
			t.log.Warn("too many wrong tokens from all clients together: the attempts of every client but those known to hold the right token are refused with 429 for a while (said at most once a minute)",
				"endpoint", a.endpoint, "retry_after", t.overall.wait(OverallEvery).Round(time.Second))
		}
	})
}

// Refuse answers an attempt that Allow refused: 429 with Retry-After in
// whole seconds.
func Refuse(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	http.Error(w, "too many wrong tokens from your address, or from many: try again in "+strconv.Itoa(max(secs, 1))+" s",
		http.StatusTooManyRequests)
}
