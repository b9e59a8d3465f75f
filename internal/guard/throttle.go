package guard

import (
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

// maxAddresses bounds the addresses the throttle remembers: past it, those
// whose bucket has refilled are forgotten, then any.
const maxAddresses = 10000

// Throttle slows down the guessing of tokens: each wrong token takes one
// from the bucket of the client's address and one from the overall
// bucket, which refill with time; while the client's is empty, or the
// overall one is and the client gave a wrong token lately, every attempt
// of that client, with the right token or not, is refused (429 with
// Retry-After), so that guessing cannot go on at its own pace. A client
// that gave no wrong token lately is not held back by the overall bucket:
// guessing from many addresses slows every guesser down but cannot lock
// out the control room's operators or a relay command with the right
// token in the middle of an incident. One
// Throttle serves the console's logins and the ops API's Bearer checks of
// a process. Its memory is bounded (maxAddresses).
type Throttle struct {
	now     func() time.Time
	log     *slog.Logger
	refused *prometheus.CounterVec

	mu      sync.Mutex
	overall bucket
	byAddr  map[netip.Prefix]*bucket
}

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
	t := &Throttle{now: now, log: log, byAddr: map[netip.Prefix]*bucket{},
		overall: bucket{tokens: OverallBurst, at: now()},
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
// for IPv6, where one client holds a whole /64.
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

// Allow reports whether an attempt from the client at addr may check its
// token now; when not, it says how long to wait, counts the refusal under
// endpoint and logs the first refusal of a bucket.
func (t *Throttle) Allow(addr, endpoint string) (time.Duration, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	b := t.byAddr[key(addr)]
	failed := b != nil && b.fill(now, PerAddressBurst, PerAddressEvery) < PerAddressBurst
	if failed && b.tokens < 1 {
		wait = b.wait(PerAddressEvery)
	}
	if t.overall.fill(now, OverallBurst, OverallEvery) < 1 && failed {
		wait = max(wait, t.overall.wait(OverallEvery))
	}
	if wait <= 0 {
		return 0, true
	}
	t.refused.WithLabelValues(endpoint).Inc()
	return wait, false
}

// Fail records a wrong token from the client at addr.
func (t *Throttle) Fail(addr, endpoint string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key(addr)
	b := t.byAddr[k]
	if b == nil {
		t.forget(now)
		b = &bucket{tokens: PerAddressBurst, at: now}
		t.byAddr[k] = b
	}
	b.fill(now, PerAddressBurst, PerAddressEvery)
	b.tokens--
	t.overall.fill(now, OverallBurst, OverallEvery)
	t.overall.tokens--
	switch {
	case b.tokens < 1 && b.tokens >= 0:
		t.log.Warn("too many wrong tokens from one client: its attempts are refused with 429 for a while",
			"endpoint", endpoint, "client", addr, "retry_after", b.wait(PerAddressEvery).Round(time.Second))
	case t.overall.tokens < 1 && t.overall.tokens >= 0:
		t.log.Warn("too many wrong tokens from all clients together: the attempts of every client that gave a wrong token lately are refused with 429 for a while",
			"endpoint", endpoint, "retry_after", t.overall.wait(OverallEvery).Round(time.Second))
	}
	// A bucket below zero refills from there: guessing on while refused
	// does not shorten the wait, and refusals do not reach here.
}

// forget drops the addresses whose bucket is full again once the map is
// at its bound, and any address if none is.
func (t *Throttle) forget(now time.Time) {
	if len(t.byAddr) < maxAddresses {
		return
	}
	for k, b := range t.byAddr {
		if b.fill(now, PerAddressBurst, PerAddressEvery) >= PerAddressBurst {
			delete(t.byAddr, k)
		}
	}
	for k := range t.byAddr {
		if len(t.byAddr) < maxAddresses {
			break
		}
		delete(t.byAddr, k)
	}
}

// Refuse answers an attempt that Allow refused: 429 with Retry-After in
// whole seconds.
func Refuse(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	http.Error(w, "too many wrong tokens from your address, or from many: try again in "+strconv.Itoa(max(secs, 1))+" s",
		http.StatusTooManyRequests)
}
