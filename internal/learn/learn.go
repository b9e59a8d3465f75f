// Package learn holds what relay has learned of the upstream it talks to,
// where the spec promises nothing: how the recovered list is ordered, what
// its time window filters on, the most rows a page serves, how many devices
// one deviceSnList may name, how late alarms are listed, whether totals
// count the rows served, and how often the account's alarms start and end. Each is a fact established from answers the poller
// already receives (no request is ever made to learn one) and re-checked by
// every later answer: a fact holds once enough evidence agrees and none
// contradicts it, and is refuted by the first answer that contradicts it.
//
// The poller's scheduler acts on some of them (docs/design.md §4, "What relay
// learns of the upstream", and "How a slot is chosen"): a fact it acts on is
// used only while it holds, or for bursts while it is not refuted, and the
// first contradiction puts the scheduler back on what the spec promises.
package learn

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// State is what is known of a fact.
type State int8

const (
	// Unknown says the evidence is not enough yet either way.
	Unknown State = 0
	// Holds says enough answers agreed with the fact and none contradicted
	// it since.
	Holds State = 1
	// Refuted says an answer contradicted the fact.
	Refuted State = -1
)

// String names the state in logs and on the console.
func (s State) String() string {
	switch s {
	case Holds:
		return "holds"
	case Refuted:
		return "refuted"
	}
	return "unknown"
}

// The names of the facts, as logs and the relay_upstream_fact metric say them.
const (
	FactRecoveryOrder      = "recovered_newest_recovery_first"
	FactOccurrenceOrder    = "recovered_newest_occurrence_first"
	FactWindowOnOccurrence = "recovered_window_on_occurrence"
	FactWindowOnRecovery   = "recovered_window_on_recovery"
	FactPageCapped         = "page_capped"
	FactDeviceListLimited  = "device_list_limited"
	FactTotalsHonest       = "totals_honest"
	FactBurstsAdmitted     = "bursts_admitted"
)

// Fact is one thing learned of the upstream.
type Fact struct {
	// Name is one of the Fact* names.
	Name  string
	State State
	// Evidence counts the observations that agreed with the fact since it
	// was last contradicted (or since relay started); Contradictions counts
	// the observations that contradicted it.
	Evidence, Contradictions int
	// Changed is when State last changed; zero while it never did.
	Changed time.Time
	// Value is the figure the fact is about: the rows a capped page serves
	// (page_capped), the most devices a deviceSnList was accepted with
	// (device_list_limited); 0 for the others.
	Value int
}

// Facts is a snapshot of what was learned.
type Facts struct {
	// RecoveryOrder says the recovered list is ordered by recovery time,
	// newest first; OccurrenceOrder by occurrence time, newest first.
	RecoveryOrder, OccurrenceOrder Fact
	// WindowOnOccurrence and WindowOnRecovery say what the time window of a
	// recovered-alarm query filters on.
	WindowOnOccurrence, WindowOnRecovery Fact
	// PageCapped says a page serves fewer rows than asked while more
	// exist; Value is that many rows.
	PageCapped Fact
	// DeviceList says a deviceSnList longer than Value is refused; Refused
	// is the shortest list refused, so the limit is between Value and
	// Refused-1 (exactly Value when Refused is Value+1).
	DeviceList Fact
	Refused    int
	// TotalsHonest says the total of a read agrees with the rows served
	// across its pages.
	TotalsHonest Fact
	// BurstsAdmitted says the rate limit admits a request sent right after
	// another, as a sliding or fixed window does, and not only one per
	// 60 s ÷ limit, as a limiter that spaces requests does.
	BurstsAdmitted Fact
	// Lateness is how late alarms are first listed.
	Lateness Lateness
	// Rates is how often the account's alarms start and end.
	Rates Rates
}

// List returns the facts in a fixed order, for tables and metrics.
func (f Facts) List() []Fact {
	return []Fact{f.RecoveryOrder, f.OccurrenceOrder, f.WindowOnOccurrence, f.WindowOnRecovery,
		f.PageCapped, f.DeviceList, f.TotalsHonest, f.BurstsAdmitted}
}

// How much agreeing evidence makes a fact hold: the first time, and again
// after it was refused (an upstream that changed its mind once must agree
// for longer before it is believed again).
const (
	orderEvidence  = 20 // pairs of adjacent rows in this order and not in the other
	windowEvidence = 3  // rows whose one time is in the window and the other not
	totalsEvidence = 10 // reads to their end
	burstEvidence  = 5  // requests admitted right after another
	relearnFactor  = 10
)

// Config configures an Upstream. Store is required.
type Config struct {
	// Store keeps what must outlive a restart (the deviceSnList limit).
	Store *store.Store
	// Clock dates the changes; default the wall clock.
	Clock clock.Clock
	// Logger receives a line per change of a fact; default none.
	Logger *slog.Logger
	// Metrics, when set, exports the facts.
	Metrics *Metrics
}

// Upstream is what relay learned of one upstream. The poller feeds it, one
// call per answer; its methods are safe for concurrent use, so that Facts
// may be read from any goroutine.
type Upstream struct {
	st  *store.Store
	clk clock.Clock
	log *slog.Logger
	m   *Metrics

	mu    sync.Mutex
	facts Facts
	late  sketch
	rate  rateCount
	// restored says the deviceSnList bounds were read from the store.
	restored bool
}

// New returns an Upstream that knows nothing yet; Restore reads what an
// earlier process stored.
func New(cfg Config) *Upstream {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	u := &Upstream{st: cfg.Store, clk: cfg.Clock, log: cfg.Logger, m: cfg.Metrics, rate: rateCount{start: cfg.Clock.Now()}}
	u.facts = Facts{
		RecoveryOrder:      Fact{Name: FactRecoveryOrder},
		OccurrenceOrder:    Fact{Name: FactOccurrenceOrder},
		WindowOnOccurrence: Fact{Name: FactWindowOnOccurrence},
		WindowOnRecovery:   Fact{Name: FactWindowOnRecovery},
		PageCapped:         Fact{Name: FactPageCapped},
		DeviceList:         Fact{Name: FactDeviceListLimited},
		TotalsHonest:       Fact{Name: FactTotalsHonest},
		BurstsAdmitted:     Fact{Name: FactBurstsAdmitted},
	}
	for _, f := range u.facts.List() {
		u.m.setFact(f)
	}
	u.m.setRates(u.rate.rates(cfg.Clock.Now()))
	return u
}

// Bursts returns the state of bursts_admitted.
func (u *Upstream) Bursts() State {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.facts.BurstsAdmitted.State
}

// RecoveryOrdered reports whether recovered_newest_recovery_first holds.
func (u *Upstream) RecoveryOrdered() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.facts.RecoveryOrder.State == Holds
}

// LatestLate returns the most an alarm of the last one to two hours was
// listed after it occurred, and how many alarms were measured.
func (u *Upstream) LatestLate() (time.Duration, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.late.summary()
	return s.Max, s.Samples
}

// Facts returns a snapshot of what was learned.
func (u *Upstream) Facts() Facts {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := u.facts
	f.Lateness = u.late.summary()
	f.Rates = u.rate.rates(u.clk.Now())
	return f
}

// storeNS and deviceListKey name where the deviceSnList bounds are kept,
// burstsKey when a burst was last refused.
const (
	storeNS       = "learn"
	deviceListKey = "device_list"
	burstsKey     = "bursts_refused"
)

// burstsRemembered is how long a refused burst is remembered across
// restarts: a day later one burst is tried again, in case the upstream's
// limiter changed.
const burstsRemembered = 24 * time.Hour

// deviceBounds is the stored form of the deviceSnList limit.
type deviceBounds struct {
	Accepted int       `json:"accepted"`
	Refused  int       `json:"refused,omitempty"`
	Changed  time.Time `json:"changed"`
}

// Restore reads what an earlier process stored: the deviceSnList limit.
// It is read once; later calls do nothing.
func (u *Upstream) Restore() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.restored {
		return nil
	}
	if err := u.restoreBursts(); err != nil {
		return err
	}
	raw, err := u.st.Get(storeNS, deviceListKey)
	if err != nil {
		return fmt.Errorf("learn: reading the deviceSnList limit: %w", err)
	}
	u.restored = true
	if raw == nil {
		return nil
	}
	var b deviceBounds
	if err := json.Unmarshal(raw, &b); err != nil {
		// A value this version cannot read is learned again.
		u.log.Warn("the stored deviceSnList limit is unreadable: it is learned again", "err", err)
		return nil
	}
	f := &u.facts.DeviceList
	f.Value, u.facts.Refused, f.Changed = b.Accepted, b.Refused, b.Changed
	if b.Refused > 0 && b.Accepted < b.Refused {
		f.State, f.Evidence = Holds, 1
	}
	u.m.setFact(*f)
	u.m.setDeviceLimit(u.deviceLimit())
	u.log.Info("upstream fact restored", "fact", f.Name, "state", f.State.String(),
		"accepted", b.Accepted, "refused", b.Refused)
	return nil
}

// DeviceLimit returns the most devices a deviceSnList is known to be
// accepted with while a longer one was refused (restored from the store
// after a restart); 0 while no list was refused.
func (u *Upstream) DeviceLimit() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.deviceLimit()
}

// deviceLimit is the most devices a deviceSnList is known to be accepted
// with while a longer one was refused; 0 while no list was refused.
func (u *Upstream) deviceLimit() int {
	if u.facts.DeviceList.State != Holds {
		return 0
	}
	return u.facts.DeviceList.Value
}

// agree records n observations that agree with f and makes it hold once
// they are enough (need, or relearnFactor times that after a refutation).
func (u *Upstream) agree(f *Fact, n, need int, detail ...any) {
	if n <= 0 {
		return
	}
	f.Evidence += n
	if f.State == Refuted {
		need *= relearnFactor
	}
	if f.State != Holds && f.Evidence >= need {
		u.change(f, Holds, detail...)
		return
	}
	u.m.setFact(*f)
}

// contradict records n observations that contradict f and refutes it.
func (u *Upstream) contradict(f *Fact, n int, detail ...any) {
	if n <= 0 {
		return
	}
	f.Contradictions += n
	f.Evidence = 0
	if f.State != Refuted {
		u.change(f, Refuted, detail...)
		return
	}
	u.m.setFact(*f)
}

// change moves f to state, logs one line and sets the metric.
func (u *Upstream) change(f *Fact, to State, detail ...any) {
	from := f.State
	f.State, f.Changed = to, u.clk.Now()
	args := append([]any{"fact", f.Name, "from", from.String(), "to", to.String(),
		"evidence", f.Evidence, "contradictions", f.Contradictions}, detail...)
	u.log.Info("upstream fact changed", args...)
	u.m.setFact(*f)
}

// RecoveredPage learns from one page of recovered alarms asked for the
// window [start, end]: the order of its rows, and which of their times the
// window filtered on.
func (u *Upstream) RecoveredPage(start, end time.Time, alarms []event.Alarm) {
	from, to := start.UnixMilli(), end.UnixMilli()
	var byRec, againstRec, byOcc, againstOcc int
	var onOcc, onRec int
	var prev *event.Alarm
	for i := range alarms {
		a := &alarms[i]
		if a.RecoveredAt.IsZero() || a.OccurredAt.IsZero() {
			continue
		}
		occ, rec := a.OccurredAt.UnixMilli(), a.RecoveredAt.UnixMilli()
		occIn, recIn := occ >= from && occ <= to, rec >= from && rec <= to
		switch {
		case occIn && !recIn:
			onOcc++
		case recIn && !occIn:
			onRec++
		}
		if prev != nil {
			// A pair in the order of one time counts for it only when it
			// is not in the order of the other: an alarm that occurred
			// later and recovered later proves neither.
			pr, po := prev.RecoveredAt.UnixMilli(), prev.OccurredAt.UnixMilli()
			switch {
			case pr < rec:
				againstRec++
			case pr > rec && po <= occ:
				byRec++
			}
			switch {
			case po < occ:
				againstOcc++
			case po > occ && pr <= rec:
				byOcc++
			}
		}
		prev = a
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.order(&u.facts.RecoveryOrder, byRec, againstRec)
	u.order(&u.facts.OccurrenceOrder, byOcc, againstOcc)
	if onRec > 0 {
		u.contradict(&u.facts.WindowOnOccurrence, onRec, "rows_recovered_in_window_occurred_outside", onRec,
			"window_start", start, "window_end", end)
	}
	if onOcc > 0 {
		u.contradict(&u.facts.WindowOnRecovery, onOcc, "rows_occurred_in_window_recovered_outside", onOcc,
			"window_start", start, "window_end", end)
	}
	u.agree(&u.facts.WindowOnOccurrence, onOcc, windowEvidence)
	u.agree(&u.facts.WindowOnRecovery, onRec, windowEvidence)
}

// order learns from one page's adjacent pairs in order (in) and out of it.
func (u *Upstream) order(f *Fact, in, out int) {
	if out > 0 {
		u.contradict(f, out, "pairs_out_of_order", out, "pairs_in_order", in)
		return
	}
	u.agree(f, in, orderEvidence)
}

// PageServed learns from one page of any alarm query: asked is the page
// size asked for, rows the rows it served, before the rows the pages before
// it in the same read served, and total the total it said. A page served
// whole (rows as asked) while total says more rows follow shows that pages
// are not capped below asked; one serving more rows than a learned cap
// shows the cap is gone.
func (u *Upstream) PageServed(asked, rows, before, total int) {
	if before+rows >= total || rows == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	f := &u.facts.PageCapped
	switch {
	case f.State == Holds && rows > f.Value:
		u.contradict(f, 1, "asked", asked, "served", rows, "cap", f.Value)
		f.Value = 0
		u.m.setPageCap(0)
	case f.State == Holds && rows == f.Value:
		u.agree(f, 1, 1)
	case f.State != Holds && rows == asked:
		u.contradict(f, 1, "asked", asked, "served", rows, "total", total)
	}
}

// PageCapped records a page cap proven by the poller's probe: a page asked
// for asked rows served served while more followed, and the next page,
// asked for served rows, found more.
func (u *Upstream) PageCapped(asked, served int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := &u.facts.PageCapped
	if f.State == Holds && f.Value == served {
		u.agree(f, 1, 1)
		return
	}
	f.Value = served
	f.Evidence++
	u.change(f, Holds, "asked", asked, "served", served)
	u.m.setPageCap(served)
}

// ReadEnded learns from a read that ended where its pages said it should
// (a short or empty page, or as many rows as total), with total unchanged
// across its pages: rows is what its pages served, total what they said.
func (u *Upstream) ReadEnded(rows, total int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := &u.facts.TotalsHonest
	if rows != total {
		u.contradict(f, 1, "rows", rows, "total", total)
		return
	}
	u.agree(f, 1, totalsEvidence)
}

// ListAnswered learns from an answer to a query naming n devices in its
// deviceSnList: refused says the upstream refused it as a bad request.
func (u *Upstream) ListAnswered(n int, refused bool) {
	if n <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	f := &u.facts.DeviceList
	var changed bool
	switch {
	case refused && (u.facts.Refused == 0 || n < u.facts.Refused):
		u.facts.Refused, changed = n, true
		if f.Value >= n {
			// A list as long was accepted before: the limit came down.
			f.Value = 0
		}
		if f.State == Holds {
			f.Evidence++
			u.log.Info("upstream fact narrowed", "fact", f.Name, "accepted", f.Value, "refused", n)
		} else {
			f.Evidence++
			u.change(f, Holds, "accepted", f.Value, "refused", n)
		}
	case refused:
		u.agree(f, 1, 1)
	case u.facts.Refused > 0 && n >= u.facts.Refused:
		// A list as long as one refused was accepted: the refusal was
		// not a limit of the length, or the limit went up.
		u.contradict(f, 1, "accepted", n, "refused", u.facts.Refused)
		u.facts.Refused, f.Value, changed = 0, n, true
	case n > f.Value:
		f.Value, changed = n, true
		if f.State == Holds {
			f.Evidence++
			u.log.Info("upstream fact narrowed", "fact", f.Name, "accepted", n, "refused", u.facts.Refused)
		}
	default:
		if f.State == Holds {
			f.Evidence++
		}
	}
	u.m.setFact(*f)
	if !changed {
		return
	}
	u.m.setDeviceLimit(u.deviceLimit())
	b, err := json.Marshal(deviceBounds{Accepted: f.Value, Refused: u.facts.Refused, Changed: u.clk.Now()})
	if err == nil {
		err = u.st.Put(store.KV{NS: storeNS, Key: deviceListKey, Value: b})
	}
	if err != nil {
		u.log.Warn("the deviceSnList limit learned is not stored: a restart learns it again", "err", err)
	}
}

// restoreBursts reads when a burst was last refused: within
// burstsRemembered, bursts_admitted is refuted again.
func (u *Upstream) restoreBursts() error {
	raw, err := u.st.Get(storeNS, burstsKey)
	if err != nil {
		return fmt.Errorf("learn: reading when a burst was refused: %w", err)
	}
	if raw == nil {
		return nil
	}
	var at time.Time
	if err := at.UnmarshalText(raw); err != nil || u.clk.Now().Sub(at) >= burstsRemembered {
		return nil
	}
	f := &u.facts.BurstsAdmitted
	f.State, f.Changed, f.Contradictions = Refuted, at, 1
	u.m.setFact(*f)
	u.log.Info("upstream fact restored", "fact", f.Name, "state", f.State.String(), "refused_at", at)
	return nil
}

// BurstAnswered learns from a request sent right after another (within a
// slot): refused says the upstream refused it for its rate limit although
// the budget's window had room for it.
func (u *Upstream) BurstAnswered(refused bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if refused {
		u.contradict(&u.facts.BurstsAdmitted, 1, "reason", "a request sent right after another was refused for the rate limit")
		at, _ := u.clk.Now().UTC().MarshalText()
		if err := u.st.Put(store.KV{NS: storeNS, Key: burstsKey, Value: at}); err != nil {
			u.log.Warn("the refused burst is not stored: a restart tries one again", "err", err)
		}
		return
	}
	u.agree(&u.facts.BurstsAdmitted, 1, burstEvidence)
}

// FirstSeen learns from an alarm first listed at seen (in the upstream's
// clock) that occurred at occurred, as its device stamped it.
func (u *Upstream) FirstSeen(occurred, seen time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.late.add(seen.Sub(occurred), u.clk.Now())
	u.m.setLateness(u.late.summary())
}
