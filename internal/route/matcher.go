package route

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/rulefile"
)

// Matcher is a compiled Match on its own, outside a route: the matchers of
// silences, maintenance windows and inhibition rules. The zero Matcher
// matches every event.
type Matcher struct {
	// Match is the conditions as written.
	Match Match
	cond  cond
}

// NewMatcher checks and compiles m: transitions, levels 0-3, device types of
// the upstream's table (kept in its spelling) and globs.
func NewMatcher(m Match) (Matcher, error) {
	var c cond
	var errs []error
	for _, t := range m.Transitions {
		if !t.Valid() {
			errs = append(errs, fmt.Errorf("transitions: %q is not a transition (want start, end or invalid)", t))
			continue
		}
		c.transitions |= 1 << transitionSlot(t)
	}
	for _, l := range m.Levels {
		if l < 0 || l > maxLevel {
			errs = append(errs, fmt.Errorf("levels: %d is not a level (want 0-3)", l))
			continue
		}
		c.levels |= 1 << l
	}
	m.DeviceTypes = slices.Clone(m.DeviceTypes)
	for i, s := range m.DeviceTypes {
		code, known := event.DeviceType(s)
		if !known {
			errs = append(errs, fmt.Errorf("device_types: %q is not a device type of the upstream (any letter case of: %s)",
				s, strings.Join(event.DeviceTypes, ", ")))
			continue
		}
		m.DeviceTypes[i] = code
	}
	for _, f := range [...]int{fTenant, fStation, fSystem, fDevice, fDeviceType, fEventCode, fEventType} {
		_, vals := stringField(&m, fieldKey(f))
		if len(*vals) > 0 {
			c.values[f] = *vals
		}
	}
	for f, pats := range map[int][]string{fStationName: m.StationNames, fDeviceName: m.DeviceNames} {
		for _, s := range pats {
			g, literal, err := compileGlob(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: bad glob %q: %v", fieldKey(f), s, err))
				continue
			}
			if literal {
				c.values[f] = append(c.values[f], g.lit())
			} else {
				c.globs[f] = append(c.globs[f], g)
				c.hasGlobs = true
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Matcher{}, err
	}
	return Matcher{Match: m, cond: c}, nil
}

// ParseMatch reads a match written as a YAML (or JSON) mapping with the keys
// of a route's match, such as `{station_ids: [S1], levels: [urgent]}`; name
// names where it came from in errors. An empty mapping matches every event.
func ParseMatch(name string, data []byte) (Matcher, error) {
	p := &parser{Reader: rulefile.NewReader(name, nil, nodeBudget)}
	root := p.document(data)
	if root == nil {
		return Matcher{}, p.Err()
	}
	m := p.matcher(root, "match")
	if err := p.Err(); err != nil {
		return Matcher{}, err
	}
	return m, nil
}

// matcher reads the match mapping n of field.
func (p *parser) matcher(n *yaml.Node, field string) Matcher {
	m, c := p.match(n, field)
	return Matcher{Match: m, cond: c}
}

// Matches reports whether ev meets every condition of m.
func (m *Matcher) Matches(ev *event.Event) bool {
	c := &m.cond
	d := &ev.Data
	if !c.admits(transitionSlot(d.Transition), levelSlot(d.Level)) {
		return false
	}
	for f := range numFields {
		if !c.constrains(f) {
			continue
		}
		if f == fStationName || f == fDeviceName {
			if !c.nameMatch(f, fieldValue(d, f)) {
				return false
			}
			continue
		}
		if !slices.Contains(c.values[f], fieldValue(d, f)) {
			return false
		}
	}
	return true
}

// String summarises the conditions, as Match.String does.
func (m *Matcher) String() string { return m.Match.String() }

// fieldKey returns the match key of field f.
func fieldKey(f int) string {
	return [...]string{fTenant: "tenant_ids", fStation: "station_ids", fSystem: "system_ids", fDevice: "device_sns",
		fDeviceType: "device_types", fEventCode: "event_codes", fEventType: "event_types",
		fStationName: "station_names", fDeviceName: "device_names"}[f]
}
