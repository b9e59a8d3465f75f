package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is an alarm's status, numbered as the spec numbers it.
type Status int

// The alarm statuses of the spec.
const (
	StatusInvalid Status = -1
	StatusEnded   Status = 0
	StatusOngoing Status = 1
)

// RandomLevel in AlarmSpec.Level picks the level at random, weighted by the
// churn's LevelWeights.
const RandomLevel = -1

// Alarm is an alarm record with every field of the spec's Alarm record table,
// as getAlarmList would answer it now. RecoveredAt is zero while the alarm is
// ongoing.
type Alarm struct {
	OriginID            string
	KafkaUUID           string
	TenantID            string
	TenantName          string
	DeviceID            string
	DeviceSN            string
	DeviceName          string
	DeviceTemplateType  string
	DeviceTemplateCode  string
	SystemID            string
	SystemCode          string
	SystemName          string
	StationID           string
	StationCode         string
	StationName         string
	OccurredAt          time.Time
	RecoveredAt         time.Time
	Status              Status
	EventCode           string
	EventDesc           string
	EventType           string
	Level               int
	CategoryCode        string
	CategoryDescription string
	CategoryInfluence   string
	TagNames            string
	TagCodes            string
	Payload             string
	Note                string
}

// AlarmSpec chooses the alarm StartAlarm or Schedule starts. Its zero value is
// a level-0 (urgent) alarm with a random event on a random device, occurring
// now.
type AlarmSpec struct {
	// DeviceSN names the device; empty picks one at random.
	DeviceSN string
	// Level is 0 (urgent) to 3 (minor), or RandomLevel.
	Level int
	// EventCode is the event; empty picks one the device type can raise. A
	// code the simulator's event library does not know is used as given.
	EventCode string
	// OccurredAt is the occurrence time; zero means when the alarm starts.
	// It may lie in the past, which makes the alarm appear late.
	OccurredAt time.Time
}

// Scheduled is an alarm that starts, and optionally ends, at given simulated
// times. Schedule applies it as the clock passes those times.
type Scheduled struct {
	// Alarm chooses the alarm; its OccurredAt defaults to StartAt.
	Alarm AlarmSpec
	// StartAt is when the alarm appears in getAlarmList; zero means now.
	StartAt time.Time
	// EndAt is when it ends, which becomes its recovery time; zero means it
	// stays ongoing.
	EndAt time.Time
	// Invalid ends it as invalid (status -1) rather than ended (status 0).
	Invalid bool
}

// Churn is random alarm traffic that advances with the clock: alarms start as
// a Poisson process on random devices and end after an exponentially
// distributed duration. It is deterministic for a seed and the same whether
// the clock moves in one step or many.
type Churn struct {
	// StartsPerMinute is the mean start rate; 0 turns churn off.
	StartsPerMinute float64
	// MeanDuration is the mean time from start to end; default 10 minutes.
	MeanDuration time.Duration
	// LevelWeights are the relative frequencies of levels 0 to 3; all zero
	// means 1:2:3:4. They also weigh RandomLevel, Storm and Backfill.
	LevelWeights [4]float64
	// InvalidFraction is the share of alarms that end as invalid.
	InvalidFraction float64
}

func (c Churn) withDefaults() Churn {
	if c.MeanDuration <= 0 {
		c.MeanDuration = 10 * time.Minute
	}
	if c.LevelWeights == [4]float64{} {
		c.LevelWeights = [4]float64{1, 2, 3, 4}
	}
	return c
}

// AlarmCounts counts the alarms the simulator tracks, by status.
type AlarmCounts struct {
	Ongoing int
	Ended   int
	Invalid int
}

// alarm is the engine's record; everything else of the wire record is derived
// from its device and event.
type alarm struct {
	id      string
	dev     *device
	ev      *eventDef
	occ     int64 // epoch ms
	rec     int64 // epoch ms, 0 while ongoing
	status  Status
	level   int
	visible bool // started: in byID and an index
}

// entry is an alarm in an index, with the fields a query filters on kept
// inline so that a scan does not chase pointers.
type entry struct {
	occ   int64
	a     *alarm
	dev   int32
	level int8
}

func (e entry) before(occ int64, id string) bool {
	return e.occ < occ || e.occ == occ && e.a.id < id
}

func compareEntries(x, y entry) int {
	if c := cmp.Compare(x.occ, y.occ); c != 0 {
		return c
	}
	return strings.Compare(x.a.id, y.a.id)
}

// index holds alarms in ascending (occurrence, originId) order, so that new
// alarms are appended and a time window is a contiguous run.
type index []entry

// search returns the position of the first alarm not before (occ, id).
func (x index) search(occ int64, id string) int {
	return sort.Search(len(x), func(i int) bool { return !x[i].before(occ, id) })
}

func (x *index) insert(a *alarm) {
	e := entry{occ: a.occ, a: a, dev: int32(a.dev.idx), level: int8(a.level)}
	*x = slices.Insert(*x, x.search(a.occ, a.id), e)
}

func (x *index) remove(a *alarm) {
	if i := x.search(a.occ, a.id); i < len(*x) && (*x)[i].a == a {
		*x = slices.Delete(*x, i, i+1)
	}
}

// action is a pending scripted or churned transition.
type action struct {
	at  int64 // epoch ms
	seq uint64
	a   *alarm
	to  Status // StatusOngoing starts the alarm
}

type actionHeap []action

func (h actionHeap) Len() int { return len(h) }
func (h actionHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h actionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *actionHeap) Push(x any)   { *h = append(*h, x.(action)) }
func (h *actionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Sources of alarm ids, so that churned ids do not depend on how test calls
// interleave with the clock.
const (
	srcManual = iota
	srcChurn
)

// engine tracks every alarm and applies scripted and churned transitions.
type engine struct {
	fleet *fleet
	seed  string

	mu         sync.Mutex
	byID       map[string]*alarm
	ongoing    index
	recovered  index
	ended      int
	invalid    int
	devOngoing []int
	sysOngoing []int
	stOngoing  []int
	pending    actionHeap
	actionSeq  uint64
	rng        *rand.Rand // draws of test calls
	idBase     uint64
	idSeq      [2]uint64
	churn      Churn
	churnRNG   *rand.Rand
	churnNext  int64 // epoch ms of the next churned start
}

func newEngine(f *fleet, seed int64, churn Churn, now time.Time) *engine {
	s := uint64(seed)
	e := &engine{
		fleet:      f,
		seed:       strconv.FormatInt(seed, 10),
		byID:       map[string]*alarm{},
		devOngoing: make([]int, len(f.devices)),
		sysOngoing: make([]int, len(f.systems)),
		stOngoing:  make([]int, len(f.stations)),
		rng:        rand.New(rand.NewPCG(s, 0xa1a4)),
		churnRNG:   rand.New(rand.NewPCG(s, 0xc4a2)),
		idBase:     1_000_000_000_000_000_000 + hash64("origin", strconv.FormatInt(seed, 10))%1_000_000_000_000_000_000,
	}
	e.setChurnLocked(churn, now.UnixMilli())
	return e
}

func (e *engine) newID(src int) string {
	n := e.idSeq[src]
	e.idSeq[src]++
	return strconv.FormatUint(e.idBase+n*2+uint64(src), 10)
}

func pickLevel(rng *rand.Rand, w [4]float64) int {
	r := rng.Float64() * (w[0] + w[1] + w[2] + w[3])
	for l := range 3 {
		if r < w[l] {
			return l
		}
		r -= w[l]
	}
	return 3
}

// newAlarm makes an alarm from spec with draws from rng; the caller starts it.
func (e *engine) newAlarm(src int, rng *rand.Rand, spec AlarmSpec, occ int64) (*alarm, error) {
	var d *device
	if spec.DeviceSN != "" {
		d = e.fleet.deviceBySN[spec.DeviceSN]
		if d == nil {
			return nil, fmt.Errorf("sim: no device with sn %q", spec.DeviceSN)
		}
	} else {
		d = e.fleet.devices[rng.IntN(len(e.fleet.devices))]
	}
	level := spec.Level
	switch {
	case level == RandomLevel:
		level = pickLevel(rng, e.churn.LevelWeights)
	case level < 0 || level > 3:
		return nil, fmt.Errorf("sim: alarm level %d is not 0..3 or RandomLevel", level)
	}
	var ev *eventDef
	if spec.EventCode == "" {
		ev = randomEvent(d, rng)
	} else {
		ev = eventFor(d, spec.EventCode)
	}
	return &alarm{id: e.newID(src), dev: d, ev: ev, occ: occ, level: level, status: StatusOngoing}, nil
}

func (e *engine) bump(d *device, by int) {
	e.devOngoing[d.idx] += by
	e.sysOngoing[d.system.idx] += by
	e.stOngoing[d.station.idx] += by
}

func (e *engine) startLocked(a *alarm) {
	a.visible = true
	a.status = StatusOngoing
	e.byID[a.id] = a
	e.ongoing.insert(a)
	e.bump(a.dev, 1)
}

func (e *engine) finishLocked(a *alarm, at int64, to Status) {
	e.ongoing.remove(a)
	a.rec, a.status = at, to
	e.recovered.insert(a)
	e.bump(a.dev, -1)
	if to == StatusInvalid {
		e.invalid++
	} else {
		e.ended++
	}
}

func (e *engine) push(at int64, a *alarm, to Status) {
	e.actionSeq++
	heap.Push(&e.pending, action{at: at, seq: e.actionSeq, a: a, to: to})
}

func (e *engine) setChurnLocked(c Churn, nowMS int64) {
	e.churn = c.withDefaults()
	e.churnNext = 0
	if e.churn.StartsPerMinute > 0 {
		e.churnNext = nowMS + e.churnGap()
	}
}

func (e *engine) churnGap() int64 {
	return max(1, int64(e.churnRNG.ExpFloat64()*60_000/e.churn.StartsPerMinute))
}

// advanceLocked applies every churned and scheduled transition due by now.
func (e *engine) advanceLocked(now time.Time) {
	ms := now.UnixMilli()
	for e.churnNext > 0 && e.churnNext <= ms {
		a, _ := e.newAlarm(srcChurn, e.churnRNG, AlarmSpec{Level: RandomLevel}, e.churnNext)
		e.startLocked(a)
		dur := max(1000, int64(e.churnRNG.ExpFloat64()*float64(e.churn.MeanDuration.Milliseconds())))
		to := StatusEnded
		if e.churnRNG.Float64() < e.churn.InvalidFraction {
			to = StatusInvalid
		}
		e.push(a.occ+dur, a, to)
		e.churnNext += e.churnGap()
	}
	for len(e.pending) > 0 && e.pending[0].at <= ms {
		act := heap.Pop(&e.pending).(action)
		switch {
		case act.to == StatusOngoing:
			if !act.a.visible {
				e.startLocked(act.a)
			}
		case act.a.visible && act.a.status == StatusOngoing:
			e.finishLocked(act.a, act.at, act.to)
		}
	}
}

// tick applies everything due by now.
func (e *engine) tick(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
}

func (e *engine) setChurn(now time.Time, c Churn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	e.setChurnLocked(c, now.UnixMilli())
}

func (e *engine) start(now time.Time, spec AlarmSpec) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	occ := now
	if !spec.OccurredAt.IsZero() {
		if spec.OccurredAt.After(now) {
			return "", errors.New("sim: alarm occurrence is in the future; use Schedule")
		}
		occ = spec.OccurredAt
	}
	a, err := e.newAlarm(srcManual, e.rng, spec, occ.UnixMilli())
	if err != nil {
		return "", err
	}
	e.startLocked(a)
	return a.id, nil
}

func (e *engine) finish(now time.Time, id string, at time.Time, to Status) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	a := e.byID[id]
	switch {
	case a == nil:
		return fmt.Errorf("sim: no started alarm %q", id)
	case a.status != StatusOngoing:
		return fmt.Errorf("sim: alarm %q is not ongoing", id)
	}
	if at.IsZero() {
		at = now
	}
	ms := at.UnixMilli()
	switch {
	case ms < a.occ:
		return fmt.Errorf("sim: alarm %q cannot end before it occurred", id)
	case at.After(now):
		return fmt.Errorf("sim: alarm %q cannot end in the future; use Schedule", id)
	}
	e.finishLocked(a, ms, to)
	return nil
}

func (e *engine) schedule(now time.Time, sc Scheduled) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	start := sc.StartAt
	if start.IsZero() {
		start = now
	}
	occ := sc.Alarm.OccurredAt
	if occ.IsZero() {
		occ = start
	}
	switch {
	case occ.After(start):
		return "", errors.New("sim: scheduled alarm occurs after it starts")
	case !sc.EndAt.IsZero() && sc.EndAt.Before(occ):
		return "", errors.New("sim: scheduled alarm ends before it occurs")
	}
	a, err := e.newAlarm(srcManual, e.rng, sc.Alarm, occ.UnixMilli())
	if err != nil {
		return "", err
	}
	e.push(start.UnixMilli(), a, StatusOngoing)
	if !sc.EndAt.IsZero() {
		to := StatusEnded
		if sc.Invalid {
			to = StatusInvalid
		}
		e.push(max(sc.EndAt.UnixMilli(), start.UnixMilli()), a, to)
	}
	e.advanceLocked(now)
	return a.id, nil
}

func (e *engine) storm(now time.Time, n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	ids := make([]string, 0, n)
	for range n {
		a, _ := e.newAlarm(srcManual, e.rng, AlarmSpec{Level: RandomLevel}, now.UnixMilli())
		e.startLocked(a)
		ids = append(ids, a.id)
	}
	return ids
}

func (e *engine) backfill(now time.Time, n int, span time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	ms, spanMS := now.UnixMilli(), max(1, span.Milliseconds())
	mean := float64(e.churn.MeanDuration.Milliseconds())
	for range n {
		a, _ := e.newAlarm(srcManual, e.rng, AlarmSpec{Level: RandomLevel}, ms-e.rng.Int64N(spanMS))
		a.visible = true
		a.rec = min(ms, a.occ+max(1000, int64(e.rng.ExpFloat64()*mean)))
		a.status = StatusEnded
		if e.rng.Float64() < e.churn.InvalidFraction {
			a.status = StatusInvalid
			e.invalid++
		} else {
			e.ended++
		}
		e.byID[a.id] = a
		e.recovered = append(e.recovered, entry{occ: a.occ, a: a, dev: int32(a.dev.idx), level: int8(a.level)})
	}
	slices.SortFunc(e.recovered, compareEntries)
}

// get returns a copy of the alarm with the given id, if it has started.
func (e *engine) get(now time.Time, id string) (alarm, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	a := e.byID[id]
	if a == nil {
		return alarm{}, false
	}
	return *a, true
}

// ongoingAlarms returns copies of the ongoing alarms, newest first.
func (e *engine) ongoingAlarms(now time.Time) []alarm {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	out := make([]alarm, 0, len(e.ongoing))
	for i := len(e.ongoing) - 1; i >= 0; i-- {
		out = append(out, *e.ongoing[i].a)
	}
	return out
}

func (e *engine) counts(now time.Time) AlarmCounts {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	return AlarmCounts{Ongoing: len(e.ongoing), Ended: e.ended, Invalid: e.invalid}
}

// assetStates copies the number of ongoing alarms per device, system and
// station, from which the states of the inventory are derived.
type assetStates struct {
	dev, sys, st []int
}

func (e *engine) states(now time.Time) assetStates {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	return assetStates{dev: slices.Clone(e.devOngoing), sys: slices.Clone(e.sysOngoing), st: slices.Clone(e.stOngoing)}
}

// alarmQuery is a validated getAlarmList request.
type alarmQuery struct {
	recovery bool
	from, to int64           // occurrence window, epoch ms, inclusive
	devices  []bool          // by device index; nil means every device
	codes    map[string]bool // nil means every event code
	levels   [4]bool
	offset   int
	size     int
}

func (q *alarmQuery) match(e entry) bool {
	return q.levels[e.level] && (q.devices == nil || q.devices[e.dev]) && (q.codes == nil || q.codes[e.a.ev.code])
}

// page answers q: the total number of matches and copies of the requested
// page, newest occurrence first and, within one millisecond, highest originId
// first. It walks the window of one index once; nothing is sorted.
func (e *engine) page(now time.Time, q alarmQuery) (int, []alarm) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	x := e.ongoing
	if q.recovery {
		x = e.recovered
	}
	lo, hi := x.search(q.from, ""), len(x)
	if q.to < math.MaxInt64 {
		hi = x.search(q.to+1, "")
	}
	total := 0
	var out []alarm
	for i := hi - 1; i >= lo; i-- {
		if !q.match(x[i]) {
			continue
		}
		if total >= q.offset && total < q.offset+q.size {
			out = append(out, *x[i].a)
		}
		total++
	}
	return total, out
}

// view is the full record of a, as tests and the wire see it.
func (e *engine) view(a alarm) Alarm {
	d, f := a.dev, e.fleet
	h := hash64(e.seed, "alarm", a.id)
	value := a.ev.threshold * (1.02 + unit(h)*0.2)
	v := Alarm{
		OriginID: a.id, KafkaUUID: e.kafkaUUID(a.id),
		TenantID: f.tenant.id, TenantName: f.tenant.name,
		DeviceID: d.id, DeviceSN: d.sn, DeviceName: d.name,
		DeviceTemplateType: d.tmpl.typ, DeviceTemplateCode: d.tmpl.code,
		SystemID: d.system.id, SystemCode: d.system.code, SystemName: d.system.name,
		StationID: d.station.id, StationCode: d.station.sn, StationName: d.station.name,
		OccurredAt: time.UnixMilli(a.occ).UTC(), Status: a.status,
		EventCode: a.ev.code, EventDesc: a.ev.desc, EventType: a.ev.typ, Level: a.level,
		CategoryCode: a.ev.category, CategoryDescription: a.ev.categoryDesc, CategoryInfluence: a.ev.influence,
		TagNames: a.ev.tagNames, TagCodes: a.ev.tagCodes,
		Payload: fmt.Sprintf(`{"point":%q,"value":%.2f,"threshold":%g}`, a.ev.point, value, a.ev.threshold),
	}
	if a.status != StatusOngoing {
		v.RecoveredAt = time.UnixMilli(a.rec).UTC()
	}
	if a.status == StatusInvalid {
		v.Note = "marked invalid"
	}
	return v
}

func (e *engine) kafkaUUID(id string) string {
	h1, h2 := hash64(e.seed, "kafka", id), hash64(e.seed, "uuid", id)
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", h1>>32, h1>>16&0xffff, h1&0xfff, 0x8000|h2>>48&0x3fff, h2&0xffffffffffff)
}
