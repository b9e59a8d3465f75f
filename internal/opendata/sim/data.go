package sim

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Limits of the data endpoints.
const (
	maxRealTimeNodes = 100
	maxHistoryIDs    = 50
	maxDayRange      = 31
	maxMonthRange    = 12
	collectEvery     = 5 * time.Minute
	dateLayout       = "2006-01-02"
	stationUTCOffset = 8 * time.Hour // the generated stations' local time
)

// rtKind says how a real-time metric moves.
type rtKind int

const (
	rtLevel   rtKind = iota // base, with jitter
	rtSolar                 // base per rated kW, following the sun
	rtCycle                 // base per rated kW, charging by night and discharging by day
	rtCounter               // base kWh per rated kW and day, since the fleet epoch
	rtToday                 // base per rated kW, the day's solar yield so far
	rtText                  // a string, as duration and gate are in the spec sample
)

type rtMetric struct {
	name   string
	kind   rtKind
	base   float64
	jitter float64
}

func repeat(prefix string, n int, kind rtKind, base, jitter float64) []rtMetric {
	out := make([]rtMetric, n)
	for i := range out {
		out[i] = rtMetric{prefix + strconv.Itoa(i+1), kind, base, jitter}
	}
	return out
}

var (
	statusMetrics = []rtMetric{
		{"state", rtLevel, 1, 0}, {"workMode", rtLevel, 1, 0}, {"errorCode", rtLevel, 0, 0},
		{"warnCode", rtLevel, 0, 0}, {"duration", rtText, 0, 0}, {"gate", rtText, 0, 0},
	}
	realTimeMetrics = map[string][]rtMetric{
		"PV": concat([]rtMetric{
			{"p", rtSolar, 0.95, 0.03}, {"s", rtSolar, 0.97, 0.03}, {"q", rtLevel, 2.5, 0.5},
			{"pf", rtLevel, 0.99, 0.01}, {"u", rtLevel, 230, 0.02}, {"ua", rtLevel, 230, 0.02},
			{"ub", rtLevel, 230, 0.02}, {"i", rtSolar, 1.45, 0.03}, {"ia", rtSolar, 1.45, 0.03},
			{"ib", rtSolar, 1.45, 0.03}, {"ic", rtSolar, 1.45, 0.03}, {"f", rtLevel, 50, 0.002},
			{"eDay", rtToday, 0.8, 0}, {"e", rtCounter, 3.5, 0}, {"t", rtLevel, 45, 0.15},
			{"tIn", rtLevel, 35, 0.1},
		}, repeat("i", 8, rtSolar, 0.08, 0.05), repeat("u", 8, rtLevel, 620, 0.03), statusMetrics),
		"Meter": {
			{"ep", rtCounter, 3, 0}, {"en", rtCounter, 0.3, 0}, {"epReactive", rtCounter, 0.5, 0},
			{"eReactive", rtCounter, 0.4, 0}, {"e", rtCounter, 3, 0}, {"p", rtSolar, 0.8, 0.05},
			{"pa", rtSolar, 0.27, 0.05}, {"pb", rtSolar, 0.27, 0.05}, {"pc", rtSolar, 0.27, 0.05},
			{"q", rtLevel, 12, 0.5}, {"s", rtSolar, 0.82, 0.05}, {"ua", rtLevel, 230, 0.02},
			{"ub", rtLevel, 230, 0.02}, {"ia", rtSolar, 0.48, 0.05}, {"ib", rtSolar, 0.48, 0.05},
			{"ic", rtSolar, 0.48, 0.05}, {"fa", rtLevel, 50, 0.002}, {"fb", rtLevel, 50, 0.002},
			{"fc", rtLevel, 50, 0.002}, {"pf", rtLevel, 0.98, 0.01}, {"pmdMonth", rtLevel, 300, 0.1},
		},
		"Environment": {{"t", rtLevel, 22, 0.3}, {"tIn", rtLevel, 24, 0.2}, {"state", rtLevel, 1, 0}},
		"Storage": concat([]rtMetric{
			{"p", rtCycle, 0.8, 0.05}, {"i", rtCycle, 1.05, 0.05}, {"u", rtLevel, 760, 0.02},
			{"t", rtLevel, 28, 0.1}, {"tIn", rtLevel, 25, 0.05}, {"e", rtCounter, 1.6, 0},
			{"en", rtCounter, 1.8, 0}, {"eDay", rtToday, 0.6, 0}, {"invalid", rtLevel, 0, 0},
		}, statusMetrics),
		"Auxiliary": concat([]rtMetric{
			{"t", rtLevel, 22, 0.1}, {"tIn", rtLevel, 26, 0.1}, {"f", rtLevel, 3.5, 0.1},
		}, statusMetrics),
	}
)

func concat(lists ...[]rtMetric) []rtMetric {
	var out []rtMetric
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// sun is the clear-sky shape of solar power at t in the stations' local time,
// 0 at night and 1 at noon; sunSoFar is its integral over the day so far, in
// hours.
func sun(t time.Time) (now, soFar float64) {
	l := t.UTC().Add(stationUTCOffset)
	h := float64(l.Hour()) + float64(l.Minute())/60 + float64(l.Second())/3600
	switch {
	case h <= 6:
		return 0, 0
	case h >= 18:
		return 0, 24 / math.Pi
	}
	x := math.Pi * (h - 6) / 12
	return math.Sin(x), 12 / math.Pi * (1 - math.Cos(x))
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// collectedAt is the time of d's last collection at or before now: every five
// minutes with a per-device phase, frozen six hours back for offline devices.
func (s *Server) collectedAt(d *device, now time.Time) time.Time {
	phase := time.Duration(hash64(s.eng.seed, "phase", d.id)%300) * time.Second
	tp := now.Add(-phase).Truncate(collectEvery).Add(phase)
	if d.baseState == "1005" {
		tp = tp.Add(-6 * time.Hour).Truncate(time.Hour)
	}
	return tp.Truncate(time.Millisecond)
}

func (s *Server) realTimeMetric(d *device, m rtMetric, tp time.Time) any {
	u := unit(hash64(s.eng.seed, "rt", d.id, m.name, strconv.FormatInt(tp.UnixMilli(), 10)))
	noise := 1 + m.jitter*(2*u-1)
	rated := d.tmpl.rated
	sunNow, sunSoFar := sun(tp)
	switch m.kind {
	case rtText:
		if m.name == "gate" {
			return strconv.Itoa(int(u * 2))
		}
		l := tp.UTC().Add(stationUTCOffset)
		return strconv.Itoa(l.Hour()*3600 + l.Minute()*60 + l.Second())
	case rtSolar:
		return round3(m.base * rated * sunNow * noise)
	case rtCycle:
		hour := float64(tp.UTC().Add(stationUTCOffset).Hour())
		return round3(m.base * rated * math.Sin(2*math.Pi*(hour-9)/24) * noise)
	case rtCounter:
		return round3(m.base * rated * tp.Sub(fleetEpoch).Hours() / 24)
	case rtToday:
		return round3(m.base * rated * sunSoFar)
	}
	return round3(m.base * noise)
}

func (s *Server) realTime(p params, now time.Time) (any, *apiError) {
	nodes, _, aerr := p.longs("deviceNodeList")
	switch {
	case aerr != nil:
		return nil, aerr
	case len(nodes) == 0:
		return nil, errorf(CodeBadParameter, "parameter deviceNodeList is required")
	case len(nodes) > maxRealTimeNodes:
		return nil, errorf(CodeOutOfRange, "deviceNodeList has %d nodes, at most %d are allowed", len(nodes), maxRealTimeNodes)
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	seen := map[string]bool{}
	for _, n := range nodes {
		d := s.fleet.deviceByNode[n]
		if d == nil || seen[n] {
			continue
		}
		seen[n] = true
		num, numTime := s.idShape(d.id), s.opts.Timestamps.numeric(d.id, bitTimes)
		tp := s.collectedAt(d, now)
		metric := map[string]any{}
		for _, m := range realTimeMetrics[d.tmpl.typ] {
			metric[m.name] = s.realTimeMetric(d, m, tp)
		}
		state, name := deviceState(d, states)
		stamp := s.upstreamTime(tp)
		list = append(list, map[string]any{
			"nodeId": idValue(d.nodeID, num), "name": d.name, "sn": d.sn,
			"stationId": idValue(d.station.id, num), "systemId": idValue(d.system.id, num),
			"state": state, "stateName": name, "tp": msValue(stamp.UnixMilli(), numTime),
			"tpTime": formatUpstream(stamp), "metric": metric,
		})
	}
	return map[string]any{"dataList": list}, nil
}

// histMetric is a history metric and its typical value per day.
type histMetric struct {
	name   string
	perDay float64
	ratio  bool // a rate or price: not scaled by the length of the period
}

var (
	systemHistoryMetrics = []histMetric{
		{"ep", 800, false}, {"eTotal", 800, false}, {"gridE", 300, false}, {"selfUseE", 500, false},
		{"selfUseRate", 0.62, true}, {"selfProfit", 350, false}, {"gridProfit", 120, false},
		{"savedProfit", 400, false}, {"co2Reduction", 640, false}, {"equivalentTree", 35, false},
		{"saveCoal", 320, false}, {"ePeak", 250, false}, {"eValley", 150, false}, {"eFlat", 400, false},
		{"weightedEPrice", 0.68, true},
	}
	stationHistoryMetrics = []histMetric{
		{"ep", 1600, false}, {"eTotal", 1600, false}, {"genEp", 1600, false}, {"epPeak", 500, false},
		{"gridE", 600, false}, {"selfUseE", 1000, false}, {"selfProfit", 700, false},
		{"profitTotal", 950, false}, {"costTotal", 200, false}, {"ePeak", 500, false},
		{"eFlat", 800, false}, {"eDeep", 100, false}, {"weightedEPrice", 0.7, true},
	}
	deviceHistoryMetrics = []histMetric{
		{"ep", 400, false}, {"epTotal", 400, false}, {"eTotal", 400, false}, {"gridE", 150, false},
		{"ePeak", 120, false}, {"eValley", 80, false}, {"eFlat", 200, false}, {"epPeak", 120, false},
		{"epValley", 80, false}, {"epFlat", 200, false},
	}
)

var identityCodes = map[string]bool{
	"assetsManage": true, "care": true, "powerMonitorInvested": true, "powerMonitor": true, "vpp": true,
}

// period is one dataList entry of a history answer.
type period struct {
	label any // the date string, nil for total
	from  time.Time
	days  float64
}

// historyQuery is a validated history request, common to the three endpoints.
type historyQuery struct {
	ids     []string
	dim     string
	start   string // the request's startDate, or the default one
	periods []period
}

func parseHistory(p params, idField string, ids []string, allowIdentity bool, now time.Time) (historyQuery, *apiError) {
	switch {
	case len(ids) == 0:
		return historyQuery{}, errorf(CodeBadParameter, "parameter %s is required", idField)
	case len(ids) > maxHistoryIDs:
		return historyQuery{}, errorf(CodeOutOfRange, "%s has %d ids, at most %d are allowed", idField, len(ids), maxHistoryIDs)
	}
	identity, hasIdentity, aerr := p.str("identityCode")
	switch {
	case aerr != nil:
		return historyQuery{}, aerr
	case hasIdentity && !allowIdentity:
		return historyQuery{}, errorf(CodeBadParameter, "parameter identityCode is not accepted by device history")
	case hasIdentity && !identityCodes[identity]:
		return historyQuery{}, errorf(CodeOutOfRange, "identityCode %q is not known", identity)
	}
	dim, ok, aerr := p.str("dimension")
	if aerr == nil && !ok {
		aerr = errorf(CodeBadParameter, "parameter dimension is required")
	}
	if aerr != nil {
		return historyQuery{}, aerr
	}
	dates := [2]time.Time{}
	given := [2]bool{}
	for i, name := range []string{"startDate", "endDate"} {
		v, ok, aerr := p.str(name)
		if aerr != nil {
			return historyQuery{}, aerr
		}
		if ok {
			t, err := time.Parse(dateLayout, v)
			if err != nil {
				return historyQuery{}, errorf(CodeBadParameter, "parameter %s must be yyyy-MM-dd, got %q", name, v)
			}
			dates[i], given[i] = t, true
		}
	}
	from, to, aerr := historyRange(dim, dates, given, now)
	if aerr != nil {
		return historyQuery{}, aerr
	}
	q := historyQuery{ids: ids, dim: dim, start: from.Format(dateLayout)}
	switch dim {
	case "total":
		q.periods = []period{{from: fleetEpoch, days: now.Sub(fleetEpoch).Hours() / 24}}
	case "day":
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			q.periods = append(q.periods, period{d.Format(dateLayout), d, 1})
		}
	case "month":
		for m := from; !m.After(to); m = m.AddDate(0, 1, 0) {
			q.periods = append(q.periods, period{m.Format("2006-01"), m, float64(m.AddDate(0, 1, -1).Day())})
		}
	case "year":
		for y := from; !y.After(to); y = y.AddDate(1, 0, 0) {
			q.periods = append(q.periods, period{y.Format("2006"), y, y.AddDate(1, 0, 0).Sub(y).Hours() / 24})
		}
	}
	return q, nil
}

// historyRange resolves the dates of a history request: the spec's defaults
// when both are omitted; when only one is given, the other closes its month
// (day), its year (month) or is the same year (year).
func historyRange(dim string, dates [2]time.Time, given [2]bool, now time.Time) (time.Time, time.Time, *apiError) {
	today := now.UTC().Truncate(24 * time.Hour)
	monthStart := func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC) }
	yearStart := func(t time.Time) time.Time { return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC) }
	from, to := dates[0], dates[1]
	switch dim {
	case "total":
		return today, today, nil
	case "day":
		switch {
		case !given[0] && !given[1]:
			from = monthStart(today)
			to = from.AddDate(0, 1, -1)
		case !given[1]:
			to = monthStart(from).AddDate(0, 1, -1)
		case !given[0]:
			from = monthStart(to)
		}
	case "month":
		switch {
		case !given[0] && !given[1]:
			from, to = yearStart(today), yearStart(today).AddDate(0, 11, 0)
		case !given[1]:
			to = yearStart(from).AddDate(0, 11, 0)
		case !given[0]:
			from = yearStart(to)
		}
		from, to = monthStart(from), monthStart(to)
	case "year":
		switch {
		case !given[0] && !given[1]:
			from, to = today, today
		case !given[1]:
			to = from
		case !given[0]:
			from = to
		}
		from, to = yearStart(from), yearStart(to)
	default:
		return from, to, errorf(CodeRangeTooLong, "dimension must be day, month, year or total, got %q", dim)
	}
	switch {
	case to.Before(from):
		return from, to, errorf(CodeRangeTooLong, "endDate is before startDate")
	case dim == "day" && to.Sub(from).Hours()/24+1 > maxDayRange:
		return from, to, errorf(CodeRangeTooLong, "day range is longer than %d days", maxDayRange)
	case dim == "month" && (to.Year()-from.Year())*12+int(to.Month()-from.Month())+1 > maxMonthRange:
		return from, to, errorf(CodeRangeTooLong, "month range is longer than %d months", maxMonthRange)
	}
	return from, to, nil
}

// dataList is the history of one asset. Future periods, and a few past ones,
// have an empty metric object; a few metrics are left out, counting as 0.
func (s *Server) dataList(thing string, scale float64, metrics []histMetric, q historyQuery, now time.Time) []map[string]any {
	out := make([]map[string]any, 0, len(q.periods))
	for _, pr := range q.periods {
		label, _ := pr.label.(string)
		metric := map[string]any{}
		empty := pr.from.After(now) || (label != "" && unit(hash64(s.eng.seed, "gap", thing, label)) < 0.04)
		for _, m := range metrics {
			if empty {
				break
			}
			h := hash64(s.eng.seed, "hist", thing, label, m.name)
			if unit(bits.RotateLeft64(h, 29)) < 0.05 {
				continue
			}
			v := m.perDay * (0.6 + 0.8*unit(h))
			if !m.ratio {
				v *= scale * pr.days
			}
			metric[m.name] = math.Round(v*100) / 100
		}
		out = append(out, map[string]any{"date": pr.label, "metric": metric})
	}
	return out
}

func (s *Server) systemHistory(p params, now time.Time) (any, *apiError) {
	ids, _, aerr := p.strs("systemIdList")
	if aerr != nil {
		return nil, aerr
	}
	q, aerr := parseHistory(p, "systemIdList", ids, true, s.upstreamTime(now))
	if aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	for _, id := range q.ids {
		sy := s.fleet.systemByID[id]
		if sy == nil {
			continue
		}
		state, name := systemState(sy, states)
		list = append(list, map[string]any{
			"thingId": idValue(sy.id, s.idShape(sy.id)), "name": sy.name, "state": state, "stateName": name,
			"dataList": s.dataList(sy.id, 1, systemHistoryMetrics, q, s.upstreamTime(now)),
		})
	}
	return map[string]any{"dataList": list}, nil
}

func (s *Server) stationHistory(p params, now time.Time) (any, *apiError) {
	ids, _, aerr := p.strs("stationIdList")
	if aerr != nil {
		return nil, aerr
	}
	q, aerr := parseHistory(p, "stationIdList", ids, true, s.upstreamTime(now))
	if aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	for _, id := range q.ids {
		st := s.fleet.stationByID[id]
		if st == nil {
			continue
		}
		list = append(list, map[string]any{
			"thingId": idValue(st.id, s.idShape(st.id)), "name": st.name, "state": s.stationState(st, states),
			"dataList": s.dataList(st.id, 1, stationHistoryMetrics, q, s.upstreamTime(now)),
		})
	}
	return map[string]any{"dataList": list}, nil
}

func (s *Server) deviceHistory(p params, now time.Time) (any, *apiError) {
	nodes, _, aerr := p.longs("deviceNodeList")
	if aerr != nil {
		return nil, aerr
	}
	q, aerr := parseHistory(p, "deviceNodeList", nodes, false, s.upstreamTime(now))
	if aerr != nil {
		return nil, aerr
	}
	var date any
	if q.dim != "total" {
		date = q.start
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	for _, n := range q.ids {
		d := s.fleet.deviceByNode[n]
		if d == nil {
			continue
		}
		num := s.idShape(d.id)
		state, name := deviceState(d, states)
		list = append(list, map[string]any{
			"thingId": idValue(d.id, num), "nodeId": idValue(d.nodeID, num), "name": d.name, "sn": d.sn,
			"stationId": idValue(d.station.id, num), "systemId": idValue(d.system.id, num),
			"state": state, "stateName": name, "date": date,
			"dataList": s.dataList(d.id, max(d.tmpl.rated, 1)/100, deviceHistoryMetrics, q, s.upstreamTime(now)),
		})
	}
	return map[string]any{"dataList": list}, nil
}
