package route

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/registry"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/rulefile"
)

// nodeBudget bounds how many YAML nodes one Parse visits, so that aliases
// expanding to aliases cannot make a small file take unbounded time.
const nodeBudget = 200_000

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Parse validates and compiles a rules file read from name. lookup reads
// environment variables (webhook secrets, chat webhook URLs); nil reads none.
// Every problem is reported, each as an *Error joined with errors.Join.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Rules, error) {
	p := &parser{Reader: rulefile.NewReader(name, lookup, nodeBudget)}
	root := p.document(data)
	if root == nil {
		return nil, p.Err()
	}
	r := p.rules(root)
	if err := p.Err(); err != nil {
		return nil, err
	}
	r.Variables = p.Variables()
	r.buildIndex()
	return r, nil
}

type parser struct {
	*rulefile.Reader
	// sinksUnread is set when the sinks, or a sink's name, could not be
	// read; routes naming unknown sinks are then not reported, as they may
	// name one of them.
	sinksUnread bool
	// intervalsUnread is set when the time intervals, or an interval's
	// name, could not be read; names of undefined intervals are then not
	// reported.
	intervalsUnread bool
	// intervalRefs are the names of time intervals used, checked once
	// every interval is read.
	intervalRefs []intervalRef
}

// document decodes data into its one YAML document and returns the top-level
// node, or nil after recording why there is none.
func (p *parser) document(data []byte) *yaml.Node {
	return p.Document(data, "the file is empty: want sinks and routes")
}

func (p *parser) rules(root *yaml.Node) *Rules {
	r := &Rules{File: p.File, sinkIndex: map[string]int{}, Intervals: map[string]*Interval{}}
	pairs, ok := p.Mapping(root, "", topKeys)
	if !ok {
		return r
	}
	var sinksLine, routesLine int
	var sinksNode, routesNode, intervalsNode, maintenanceNode, inhibitNode *yaml.Node
	for _, kv := range pairs {
		switch kv.Key {
		case "sinks":
			sinksLine, sinksNode = kv.Line, kv.Val
		case "routes":
			routesLine, routesNode = kv.Line, kv.Val
		case "time_intervals":
			intervalsNode = kv.Val
		case "maintenance":
			maintenanceNode = kv.Val
		case "inhibit":
			inhibitNode = kv.Val
		}
	}
	p.timeIntervals(r, intervalsNode)
	if rulefile.IsNull(sinksNode) {
		p.Errorf(cmp.Or(sinksLine, root.Line), "sinks", "no sinks: want a list of at least one sink")
		p.sinksUnread = true
	} else if items, ok := p.list(sinksNode, "sinks"); ok {
		for i, item := range items {
			p.sink(r, item, fmt.Sprintf("sinks[%d]", i))
		}
	} else {
		p.sinksUnread = true
	}
	if rulefile.IsNull(routesNode) {
		p.Errorf(cmp.Or(routesLine, root.Line), "routes", "no routes: want a list of at least one route")
	} else if items, ok := p.list(routesNode, "routes"); ok {
		names := map[string]int{}
		for i, item := range items {
			r.Routes = append(r.Routes, p.route(r, item, fmt.Sprintf("routes[%d]", i), names))
		}
	}
	p.maintenanceWindows(r, maintenanceNode)
	p.inhibits(r, inhibitNode)
	p.checkIntervalRefs(r)
	return r
}

// list returns the items of a top-level list, which must not be empty.
func (p *parser) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		p.Errorf(n.Line, field, "want a list, got %s", rulefile.Describe(n))
		return nil, false
	}
	items, ok := p.Sequence(n, field)
	if ok && len(items) == 0 {
		p.Errorf(n.Line, field, "empty list: want at least one entry")
		return nil, false
	}
	return items, ok
}

func (p *parser) sink(r *Rules, n *yaml.Node, field string) {
	pairs, ok := p.Mapping(n, field, nil)
	if !ok {
		p.sinksUnread = true
		return
	}
	s := Sink{Line: n.Line, MaxAge: notify.DefaultMaxAge, MaxRetryAfter: notify.DefaultMaxRetryAfter, SendResolved: true,
		Digest: Digest{Threshold: DefaultDigestThreshold, Window: DefaultDigestWindow}}
	var nameOK bool
	var typ sinktype.Type
	typeOK := false
	if kv, found := rulefile.Find(pairs, "name"); found {
		// A name that breaks the naming rule still defines the sink, so
		// that routes naming it are not also reported.
		s.Name, _ = p.name(kv.Val, rulefile.Join(field, "name"))
		nameOK = s.Name != ""
	} else {
		p.Errorf(n.Line, rulefile.Join(field, "name"), "missing: every sink needs a name")
	}
	if !nameOK {
		p.sinksUnread = true
	}
	types := strings.Join(registry.Names(), ", ")
	if kv, found := rulefile.Find(pairs, "type"); found {
		s.Type, typeOK = p.Str(kv.Val, rulefile.Join(field, "type"))
		if typeOK {
			if typ, typeOK = registry.Lookup(s.Type); !typeOK {
				p.Errorf(kv.Val.Line, rulefile.Join(field, "type"), "unknown sink type %q (want %s)", s.Type, types)
			}
			s.Machines = typ.Machines
		}
	} else {
		p.Errorf(n.Line, rulefile.Join(field, "type"), "missing: want one of %s", types)
	}
	if nameOK {
		if first, dup := r.sinkIndex[s.Name]; dup {
			p.Errorf(lineOf(pairs, "name"), rulefile.Join(field, "name"), "sink %q is already defined at line %d", s.Name, r.Sinks[first].Line)
			nameOK = false
		}
	}
	var options []rulefile.Pair
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		switch kv.Key {
		case "name", "type":
		case "max_age":
			s.MaxAge, _ = p.Duration(kv.Val, sub)
		case "max_retry_after":
			s.MaxRetryAfter, _ = p.Duration(kv.Val, sub)
		case "send_resolved":
			if v, ok := p.Bool(kv.Val, sub); ok {
				s.SendResolved = v
			}
		case "digest":
			s.Digest = p.digest(kv.Val, sub)
		case "daily_summary":
			s.DailySummary = p.dailyTime(kv.Val, sub)
		default:
			options = append(options, kv)
		}
	}
	if typeOK {
		s.Config, s.fingerprint = sinktype.Decode(typ, p.Reader, field, n.Line, options, sinkCommonKeys)
	} else {
		// The options of an unknown type cannot be checked; only keys
		// that no sink type has are reported.
		for _, kv := range options {
			if !knownSinkKey(kv.Key) {
				p.Errorf(kv.Line, rulefile.Join(field, kv.Key), "unknown key %q", kv.Key)
			}
		}
	}
	if nameOK {
		// A sink with problems still defines its name, so that routes naming
		// it are not also reported as naming an undefined sink.
		r.sinkIndex[s.Name] = len(r.Sinks)
		r.Sinks = append(r.Sinks, s)
	}
}

// knownSinkKey reports whether any sink type has the option key.
func knownSinkKey(key string) bool {
	for _, t := range registry.Types() {
		if slices.Contains(t.Keys(), key) {
			return true
		}
	}
	return false
}

// lineOf returns the line of key, which the caller knows is present.
func lineOf(pairs []rulefile.Pair, key string) int {
	v, _ := rulefile.Find(pairs, key)
	return v.Line
}

// name reads the name of a sink or route: letters, digits, _ . -, up to 64.
func (p *parser) name(n *yaml.Node, field string) (string, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return "", false
	}
	if !nameRE.MatchString(s) {
		p.Errorf(n.Line, field, "%q is not a valid name: want letters, digits, _, . or -, starting with a letter or digit, at most 64", s)
		return s, false
	}
	return s, true
}

func (p *parser) route(r *Rules, n *yaml.Node, field string, names map[string]int) Route {
	rt := Route{Line: n.Line}
	pairs, ok := p.Mapping(n, field, routeKeys)
	if !ok {
		return rt
	}
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		switch kv.Key {
		case "name":
			if name, ok := p.name(kv.Val, sub); ok {
				if first, dup := names[name]; dup {
					p.Errorf(kv.Val.Line, sub, "route %q is already defined at line %d", name, first)
				} else {
					names[name] = n.Line
				}
				rt.Name = name
			}
		case "match":
			rt.Match, rt.cond = p.match(kv.Val, sub)
		case "to":
			rt.To = p.to(r, kv.Val, sub)
		case "continue":
			rt.Continue, _ = p.Bool(kv.Val, sub)
		case "hold":
			rt.Hold = p.durationIn(kv.Val, sub, time.Second, MaxHold, true)
		case "suppress":
			if b, ok := p.Bool(kv.Val, sub); ok {
				rt.Suppress = &b
			}
		case "repeat":
			rt.Repeat = p.durationIn(kv.Val, sub, MinRepeat, 0, true)
		case "repeat_until":
			if v, ok := p.Str(kv.Val, sub); ok {
				switch v {
				case "acknowledged":
				case "cleared":
					rt.RepeatUntilCleared = true
				default:
					p.Errorf(kv.Val.Line, sub, "%q: want acknowledged (reminders stop once someone acknowledged the alarm) or cleared (they go on until it ends)", v)
				}
			}
		case "ack_by":
			rt.AckBy = p.ackBy(kv.Val, sub)
		case "escalate":
			rt.Escalate = p.escalate(r, kv.Val, sub)
		case "active_when":
			rt.ActiveWhen = p.intervalNames(kv.Val, sub)
		case "mute_when":
			rt.MuteWhen = p.intervalNames(kv.Val, sub)
		}
	}
	if _, ok := rulefile.Find(pairs, "name"); !ok {
		p.Errorf(n.Line, rulefile.Join(field, "name"), "missing: every route needs a name")
	}
	if _, ok := rulefile.Find(pairs, "to"); !ok {
		p.Errorf(n.Line, rulefile.Join(field, "to"), "missing: the route names no sink")
	}
	if kv, ok := rulefile.Find(pairs, "hold"); ok && rt.Hold > 0 {
		// A held start is attempted first when its hold is over; max_age,
		// counted from when it was produced, must leave room for retries.
		for _, name := range rt.To {
			if s := r.Sinks[r.sinkIndex[name]]; s.MaxAge <= rt.Hold {
				p.Errorf(kv.Line, rulefile.Join(field, "hold"),
					"hold %s is not shorter than max_age %s of sink %q: a held start would be dead-lettered at its first failed attempt; shorten the hold or raise the sink's max_age",
					rt.Hold, s.MaxAge, name)
			}
		}
	}
	return rt
}

func (p *parser) to(r *Rules, n *yaml.Node, field string) []string {
	items, ok := p.Sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Errorf(n.Line, field, "empty list: the route names no sink")
		return nil
	}
	var out []string
	for _, it := range items {
		name, ok := p.Str(it, field)
		if !ok {
			continue
		}
		if _, defined := r.sinkIndex[name]; !defined {
			if !p.sinksUnread {
				p.Errorf(it.Line, field, "sink %q is not defined", name)
			}
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func (p *parser) match(n *yaml.Node, field string) (Match, cond) {
	var m Match
	var c cond
	pairs, _ := p.Mapping(n, field, matchKeys)
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		items, ok := p.Sequence(kv.Val, sub)
		if !ok {
			continue
		}
		if len(items) == 0 {
			p.Errorf(kv.Val.Line, sub, "empty list matches nothing: leave the key out to match any")
			continue
		}
		switch kv.Key {
		case "transitions":
			for _, it := range items {
				s, ok := p.Str(it, sub)
				if !ok {
					continue
				}
				t := event.Transition(s)
				if !t.Valid() {
					p.Errorf(it.Line, sub, "%q is not a transition (want start, end or invalid)", s)
					continue
				}
				m.Transitions = append(m.Transitions, t)
				c.transitions |= 1 << transitionSlot(t)
			}
		case "levels":
			for _, it := range items {
				if l, ok := p.level(it, sub); ok {
					m.Levels = append(m.Levels, l)
					c.levels |= 1 << l
				}
			}
		case "station_names", "device_names":
			f := fStationName
			if kv.Key == "device_names" {
				f = fDeviceName
			}
			var written []string
			for _, it := range items {
				s, ok := p.Str(it, sub)
				if !ok {
					continue
				}
				g, literal, err := compileGlob(s)
				if err != nil {
					p.Errorf(it.Line, sub, "bad glob %q: %v", s, err)
					continue
				}
				written = append(written, s)
				if literal {
					c.values[f] = append(c.values[f], g.lit())
				} else {
					c.globs[f] = append(c.globs[f], g)
					c.hasGlobs = true
				}
			}
			if f == fStationName {
				m.StationNames = written
			} else {
				m.DeviceNames = written
			}
		default:
			var vals []string
			for _, it := range items {
				s, ok := p.Str(it, sub)
				if !ok {
					continue
				}
				if kv.Key == "device_types" {
					code, known := event.DeviceType(s)
					if !known {
						p.Errorf(it.Line, sub, "%q is not a device type of the upstream (any letter case of: %s)",
							s, strings.Join(event.DeviceTypes, ", "))
						continue
					}
					s = code
				}
				vals = append(vals, s)
			}
			f, target := stringField(&m, kv.Key)
			*target = vals
			c.values[f] = vals
		}
	}
	return m, c
}

// stringField returns the field index and the Match list of a key that
// lists plain values.
func stringField(m *Match, key string) (int, *[]string) {
	switch key {
	case "tenant_ids":
		return fTenant, &m.TenantIDs
	case "station_ids":
		return fStation, &m.StationIDs
	case "system_ids":
		return fSystem, &m.SystemIDs
	case "device_sns":
		return fDevice, &m.DeviceSNs
	case "device_types":
		return fDeviceType, &m.DeviceTypes
	case "event_codes":
		return fEventCode, &m.EventCodes
	}
	return fEventType, &m.EventTypes
}

// level reads a level: 0 to 3, or its name (urgent, severe, major, minor).
func (p *parser) level(n *yaml.Node, field string) (int, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return 0, false
	}
	for l := 0; l <= maxLevel; l++ {
		if s == strconv.Itoa(l) || s == event.LevelName(l) {
			return l, true
		}
	}
	p.Errorf(n.Line, field, "%q is not a level (want 0-3, or urgent, severe, major, minor)", s)
	return 0, false
}
