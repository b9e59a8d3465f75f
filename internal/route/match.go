package route

import (
	"errors"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/event"
)

// maxLevel is the highest upstream event level (3, minor).
const maxLevel = 3

// transitionSlots are the transitions in the order of their bits in a cond.
var transitionSlots = [...]event.Transition{event.Start, event.End, event.Invalid}

// transitionSlot returns the index of t in transitionSlots, or
// len(transitionSlots) for anything else.
func transitionSlot(t event.Transition) int {
	for i, s := range transitionSlots {
		if s == t {
			return i
		}
	}
	return len(transitionSlots)
}

// levelSlot returns l, or maxLevel+1 for a level outside 0-3.
func levelSlot(l int) int {
	if l < 0 || l > maxLevel {
		return maxLevel + 1
	}
	return l
}

// Fields of an event that routes match on, other than transition and level.
const (
	fTenant = iota
	fStation
	fSystem
	fDevice
	fDeviceType
	fEventCode
	fEventType
	fStationName // globs
	fDeviceName  // globs
	numFields
)

func fieldValue(d *event.Data, f int) string {
	switch f {
	case fTenant:
		return d.TenantID
	case fStation:
		return d.StationID
	case fSystem:
		return d.SystemID
	case fDevice:
		return d.DeviceSN
	case fDeviceType:
		// Rules name the spec's spelling; the upstream's letter case may
		// differ.
		code, _ := event.DeviceType(d.DeviceTemplateCode)
		return code
	case fEventCode:
		return d.EventCode
	case fEventType:
		return d.EventType
	case fStationName:
		return d.StationName
	case fDeviceName:
		return d.DeviceName
	}
	return ""
}

// cond is the compiled form of a Match. Transitions and levels are bit sets
// (zero: any). values holds, per field, the values a route accepts (nil:
// any); for name fields it holds the patterns without wildcards, and globs
// the others.
type cond struct {
	transitions uint8
	levels      uint8
	values      [numFields][]string
	globs       [numFields][]glob
	hasGlobs    bool
}

func (c *cond) constrains(f int) bool { return c.values[f] != nil || c.globs[f] != nil }

// admits reports whether the transitions and levels of c admit the slots.
func (c *cond) admits(ts, ls int) bool {
	return (c.transitions == 0 || c.transitions&(1<<ts) != 0) && (c.levels == 0 || c.levels&(1<<ls) != 0)
}

// globsMatch checks the name fields that have globs; the index has already
// checked every other condition.
func (c *cond) globsMatch(d *event.Data) bool {
	for _, f := range [...]int{fStationName, fDeviceName} {
		if c.globs[f] == nil {
			continue
		}
		if !c.nameMatch(f, fieldValue(d, f)) {
			return false
		}
	}
	return true
}

func (c *cond) nameMatch(f int, v string) bool {
	if slices.Contains(c.values[f], v) {
		return true
	}
	for _, g := range c.globs[f] {
		if g.match(v) {
			return true
		}
	}
	return false
}

// routeSet is a bit set of route indexes.
type routeSet []uint64

func (s routeSet) add(i int) { s[i/64] |= 1 << (i % 64) }

// index finds the routes an event may match with a few map lookups and bit
// operations, whatever the number of routes: a route is a candidate when its
// transition-and-level set, and for every field it constrains, the set of
// that field's value, hold it.
type index struct {
	words int
	// byTL holds, per transition and level slot, the routes admitting them.
	byTL [len(transitionSlots) + 1][maxLevel + 2]routeSet
	// fields are the fields at least one route constrains.
	fields []fieldIndex
}

type fieldIndex struct {
	field int
	// open holds the routes that do not constrain the field, and those with
	// globs on it, which are checked one by one.
	open routeSet
	// by holds, per value, the routes that list it.
	by map[string]routeSet
}

// maxStackWords is how many words of candidate bits AppendSinks keeps on the
// stack: with up to 64 * maxStackWords routes it does not allocate.
const maxStackWords = 8

// buildIndex precomputes the index of r's routes.
func (r *Rules) buildIndex() {
	n := len(r.Routes)
	x := &r.idx
	x.words = (n + 63) / 64
	newSet := func() routeSet { return make(routeSet, x.words) }
	for ts := range x.byTL {
		for ls := range x.byTL[ts] {
			set := newSet()
			for i := range r.Routes {
				if r.Routes[i].cond.admits(ts, ls) {
					set.add(i)
				}
			}
			x.byTL[ts][ls] = set
		}
	}
	for f := range numFields {
		if !slices.ContainsFunc(r.Routes, func(rt Route) bool { return rt.cond.constrains(f) }) {
			continue
		}
		fi := fieldIndex{field: f, open: newSet(), by: map[string]routeSet{}}
		for i := range r.Routes {
			c := &r.Routes[i].cond
			if !c.constrains(f) || c.globs[f] != nil {
				fi.open.add(i)
			}
			for _, v := range c.values[f] {
				set, ok := fi.by[v]
				if !ok {
					set = newSet()
					fi.by[v] = set
				}
				set.add(i)
			}
		}
		x.fields = append(x.fields, fi)
	}
}

// each calls fn with the routes ev matches, in order, up to and including
// the first that does not continue.
func (r *Rules) each(ev *event.Event, fn func(rt *Route)) {
	x := &r.idx
	var buf [maxStackWords]uint64
	var cand routeSet
	if x.words <= maxStackWords {
		cand = buf[:x.words]
	} else {
		cand = make(routeSet, x.words)
	}
	d := &ev.Data
	copy(cand, x.byTL[transitionSlot(d.Transition)][levelSlot(d.Level)])
	for i := range x.fields {
		fi := &x.fields[i]
		hit := fi.by[fieldValue(d, fi.field)]
		var left uint64
		for w := range cand {
			m := fi.open[w]
			if hit != nil {
				m |= hit[w]
			}
			cand[w] &= m
			left |= cand[w]
		}
		if left == 0 {
			return
		}
	}
	for w, word := range cand {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			rt := &r.Routes[i]
			if rt.cond.hasGlobs && !rt.cond.globsMatch(d) {
				continue
			}
			fn(rt)
			if !rt.Continue {
				return
			}
		}
	}
}

// Glob tokens.
const (
	tokLit  = iota // a literal run of characters
	tokOne         // ? : any one character
	tokStar        // * : any run of characters, possibly empty
)

type token struct {
	kind uint8
	lit  string
}

// glob is a compiled name pattern.
type glob []token

// lit returns the text of a glob without wildcards.
func (g glob) lit() string {
	if len(g) == 0 {
		return ""
	}
	return g[0].lit
}

var (
	errEmptyGlob  = errors.New("empty pattern")
	errTrailingBS = errors.New(`ends with a lone \ : write \\ for a backslash`)
	errBadEscape  = errors.New(`\ escapes only *, ? or \`)
)

// compileGlob compiles a pattern in which * matches any run of characters,
// ? any one character and \ escapes *, ? or \. literal reports that it has
// no wildcard.
func compileGlob(pattern string) (g glob, literal bool, err error) {
	if pattern == "" {
		return nil, false, errEmptyGlob
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			g = append(g, token{kind: tokLit, lit: lit.String()})
			lit.Reset()
		}
	}
	literal = true
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			if i+1 == len(pattern) {
				return nil, false, errTrailingBS
			}
			i++
			if e := pattern[i]; e == '*' || e == '?' || e == '\\' {
				lit.WriteByte(e)
			} else {
				return nil, false, errBadEscape
			}
		case '*':
			flush()
			literal = false
			if len(g) == 0 || g[len(g)-1].kind != tokStar {
				g = append(g, token{kind: tokStar})
			}
		case '?':
			flush()
			literal = false
			g = append(g, token{kind: tokOne})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return g, literal, nil
}

// match reports whether s matches the whole pattern. It backtracks only to
// the last star, which is enough because every other token matches a fixed
// number of characters; it does not allocate.
func (g glob) match(s string) bool {
	ti, si := 0, 0
	star, starAt := -1, 0
	for {
		if ti < len(g) {
			t := &g[ti]
			switch t.kind {
			case tokStar:
				star, starAt = ti, si
				ti++
				continue
			case tokOne:
				if si < len(s) {
					_, w := utf8.DecodeRuneInString(s[si:])
					si += w
					ti++
					continue
				}
			case tokLit:
				if strings.HasPrefix(s[si:], t.lit) {
					si += len(t.lit)
					ti++
					continue
				}
			}
		} else if si == len(s) {
			return true
		}
		if star < 0 || starAt >= len(s) {
			return false
		}
		_, w := utf8.DecodeRuneInString(s[starAt:])
		starAt += w
		ti, si = star+1, starAt
	}
}
