package opendata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Per-call limits of the point-data endpoints (spec, Limits).
const (
	maxRealTimeNodes = 100
	maxHistoryIDs    = 50
	maxDayRange      = 31 // days per call
	maxMonthRange    = 12 // months per call
)

// RealTimeItem is the latest measurement of one device.
type RealTimeItem struct {
	NodeID    string `json:"nodeId"`
	Name      string `json:"name"`
	SN        string `json:"sn"`
	StationID string `json:"stationId"`
	SystemID  string `json:"systemId"`
	State     string `json:"state"`
	StateName string `json:"stateName"`
	// CollectedAt is tp, falling back to tpTime read in Config.Location.
	CollectedAt time.Time `json:"collectedAt"`
	// Metrics holds the numeric values (numbers and numeric strings); a
	// metric not returned counts as 0. Text holds the others, such as
	// duration and gate.
	Metrics map[string]float64 `json:"metrics"`
	Text    map[string]string  `json:"text"`
	// Raw is the record as received.
	Raw json.RawMessage `json:"raw"`
}

// DeviceRealTime returns the latest measurements of the devices with these
// node ids, in chunks of 100 per upstream call, merged in order.
func (c *Client) DeviceRealTime(ctx context.Context, nodeIDs []string) ([]RealTimeItem, error) {
	if len(nodeIDs) == 0 {
		return nil, &Error{Endpoint: endpointRealTime, Kind: KindBadRequest, Err: errors.New("at least one device node id is required")}
	}
	var out []RealTimeItem
	for chunk := range slices.Chunk(nodeIDs, maxRealTimeNodes) {
		items, err := c.list(ctx, endpointRealTime, map[string]any{"deviceNodeList": longs(chunk)})
		if err != nil {
			return nil, err
		}
		for _, raw := range items {
			f, ok := recordFields(raw)
			if !ok {
				continue
			}
			it := RealTimeItem{
				NodeID:      f.str("nodeId"),
				Name:        f.str("name"),
				SN:          f.str("sn"),
				StationID:   f.str("stationId"),
				SystemID:    f.str("systemId"),
				State:       f.str("state"),
				StateName:   f.str("stateName"),
				CollectedAt: f.timeOf("tp", "tpTime", c.loc),
				Raw:         cloneRaw(raw),
			}
			it.Metrics, it.Text = metricsOf(metricObject(f))
			out = append(out, it)
		}
	}
	return out, nil
}

// metricObject returns the metric map of a record: samples name it metric,
// field tables metrics.
func metricObject(f fields) json.RawMessage {
	if m, ok := f["metric"]; ok {
		return m
	}
	return f["metrics"]
}

// Dimension is the granularity of history data.
type Dimension string

// The history dimensions.
const (
	DimensionDay   Dimension = "day"
	DimensionMonth Dimension = "month"
	DimensionYear  Dimension = "year"
	DimensionTotal Dimension = "total"
)

// dateLayout is how history dates are written in requests.
const dateLayout = "2006-01-02"

// HistoryQuery asks for history data of systems, stations or devices.
type HistoryQuery struct {
	// IDs are system ids (SystemHistory), station ids (StationHistory) or
	// device node ids (DeviceHistory). More than 50 are split into
	// several calls.
	IDs []string
	// Dimension is required.
	Dimension Dimension
	// StartDate and EndDate are yyyy-MM-dd; either may be empty for the
	// upstream's defaults. A range longer than 31 days (day) or 12 months
	// (month) is split into several calls.
	StartDate, EndDate string
	// IdentityCode is the owner identity, such as assetsManage (the
	// upstream's default) or care; device history takes none.
	IdentityCode string
}

// HistoryItem is the history of one asset.
type HistoryItem struct {
	ThingID string `json:"thingId"`
	Name    string `json:"name"`
	// State and StateName are the state of a system or device; States is
	// the state list of a station.
	State     string      `json:"state"`
	StateName string      `json:"stateName"`
	States    []StateItem `json:"states"`
	// NodeID, SN, StationID, SystemID and Date are set for devices.
	NodeID    string `json:"nodeId"`
	SN        string `json:"sn"`
	StationID string `json:"stationId"`
	SystemID  string `json:"systemId"`
	Date      string `json:"date"`
	// Points are the data points in date order, from every call the
	// query was split into.
	Points []HistoryPoint `json:"points"`
	// Raw is the entry as received; for an entry merged from several
	// calls, the first call's entry with dataList holding every point.
	Raw json.RawMessage `json:"raw"`
}

// HistoryPoint is the data of one date.
type HistoryPoint struct {
	// Date is yyyy-MM-dd, yyyy-MM or yyyy by dimension, empty for total.
	Date string `json:"date"`
	// Metrics holds the numeric values; a metric not returned counts as 0.
	// Text holds values that are not numbers.
	Metrics map[string]float64 `json:"metrics"`
	Text    map[string]string  `json:"text"`
	// Raw is the point as received.
	Raw json.RawMessage `json:"raw"`
}

// SystemHistory returns history data of systems (q.IDs are system ids).
func (c *Client) SystemHistory(ctx context.Context, q HistoryQuery) ([]HistoryItem, error) {
	return c.history(ctx, endpointSystemHistory, "systemIdList", q)
}

// StationHistory returns history data of stations (q.IDs are station ids).
func (c *Client) StationHistory(ctx context.Context, q HistoryQuery) ([]HistoryItem, error) {
	return c.history(ctx, endpointStationHistory, "stationIdList", q)
}

// DeviceHistory returns history data of devices (q.IDs are device node ids).
func (c *Client) DeviceHistory(ctx context.Context, q HistoryQuery) ([]HistoryItem, error) {
	return c.history(ctx, endpointDeviceHistory, "deviceNodeList", q)
}

// history splits q into calls of at most 50 ids and one allowed date range
// each, and merges the answers per asset.
func (c *Client) history(ctx context.Context, endpoint, idsKey string, q HistoryQuery) ([]HistoryItem, error) {
	ranges, err := planHistory(endpoint, q)
	if err != nil {
		return nil, &Error{Endpoint: endpoint, Kind: KindBadRequest, Err: err}
	}
	m := historyMerge{index: map[string]int{}}
	for ids := range slices.Chunk(q.IDs, maxHistoryIDs) {
		for _, r := range ranges {
			body := map[string]any{"dimension": string(q.Dimension)}
			if endpoint == endpointDeviceHistory {
				body[idsKey] = longs(ids)
			} else {
				body[idsKey] = ids
			}
			if r.start != "" {
				body["startDate"] = r.start
			}
			if r.end != "" {
				body["endDate"] = r.end
			}
			if q.IdentityCode != "" {
				body["identityCode"] = q.IdentityCode
			}
			items, err := c.list(ctx, endpoint, body)
			if err != nil {
				return nil, err
			}
			for _, raw := range items {
				if f, ok := recordFields(raw); ok {
					m.add(f, raw)
				}
			}
		}
	}
	return m.result(), nil
}

// dateRange is the dates of one history call; empty means not sent.
type dateRange struct{ start, end string }

// planHistory checks q and splits its dates into the ranges one call may ask.
func planHistory(endpoint string, q HistoryQuery) ([]dateRange, error) {
	if len(q.IDs) == 0 {
		return nil, errors.New("at least one id is required")
	}
	if endpoint == endpointDeviceHistory && q.IdentityCode != "" {
		return nil, fmt.Errorf("identity code %q: device history takes none", q.IdentityCode)
	}
	switch q.Dimension {
	case DimensionDay, DimensionMonth, DimensionYear, DimensionTotal:
	case "":
		return nil, errors.New("dimension is required: day, month, year or total")
	default:
		return nil, fmt.Errorf("dimension %q: want day, month, year or total", q.Dimension)
	}
	var start, end time.Time
	for _, d := range []struct {
		name, value string
		t           *time.Time
	}{{"start date", q.StartDate, &start}, {"end date", q.EndDate, &end}} {
		if d.value == "" {
			continue
		}
		t, err := time.Parse(dateLayout, d.value)
		if err != nil {
			return nil, fmt.Errorf("%s %q: want yyyy-MM-dd", d.name, d.value)
		}
		*d.t = t
	}
	whole := []dateRange{{q.StartDate, q.EndDate}}
	if start.IsZero() || end.IsZero() {
		return whole, nil
	}
	if end.Before(start) {
		return nil, fmt.Errorf("end date %s is before start date %s", q.EndDate, q.StartDate)
	}
	var chunkEnd func(time.Time) time.Time
	switch q.Dimension {
	case DimensionDay:
		chunkEnd = func(s time.Time) time.Time { return s.AddDate(0, 0, maxDayRange-1) }
	case DimensionMonth:
		// Day 0 of a month is the last day of the month before it.
		chunkEnd = func(s time.Time) time.Time {
			return time.Date(s.Year(), s.Month()+maxMonthRange, 0, 0, 0, 0, 0, time.UTC)
		}
	default:
		return whole, nil
	}
	var out []dateRange
	for s := start; !s.After(end); {
		e := chunkEnd(s)
		if e.After(end) {
			e = end
		}
		out = append(out, dateRange{s.Format(dateLayout), e.Format(dateLayout)})
		s = e.AddDate(0, 0, 1)
	}
	return out, nil
}

// historyMerge merges history entries of several calls per asset.
type historyMerge struct {
	items  []HistoryItem
	raws   []fields // the first entry of each item
	merged []bool
	index  map[string]int
}

func (m *historyMerge) add(f fields, raw json.RawMessage) {
	var points []HistoryPoint
	for _, p := range f.list("dataList") {
		pf, ok := recordFields(p)
		if !ok {
			continue
		}
		hp := HistoryPoint{Date: pf.str("date"), Raw: cloneRaw(p)}
		hp.Metrics, hp.Text = metricsOf(metricObject(pf))
		points = append(points, hp)
	}
	key := f.str("thingId")
	if key == "" {
		key = "node:" + f.str("nodeId") + "/sn:" + f.str("sn") + "/name:" + f.str("name")
	}
	if i, ok := m.index[key]; ok {
		m.items[i].Points = append(m.items[i].Points, points...)
		m.merged[i] = true
		return
	}
	it := HistoryItem{
		ThingID:   f.str("thingId"),
		Name:      f.str("name"),
		StateName: f.str("stateName"),
		NodeID:    f.str("nodeId"),
		SN:        f.str("sn"),
		StationID: f.str("stationId"),
		SystemID:  f.str("systemId"),
		Date:      f.str("date"),
		Points:    points,
		Raw:       cloneRaw(raw),
	}
	if states := f.list("state"); states != nil {
		it.States = stateItems(states)
	} else {
		it.State = f.str("state")
	}
	m.index[key] = len(m.items)
	m.items = append(m.items, it)
	m.raws = append(m.raws, f)
	m.merged = append(m.merged, false)
}

// result sorts every item's points by date; an item merged from several
// calls keeps one point per date (the last received) and gets a Raw whose
// dataList holds all of them.
func (m *historyMerge) result() []HistoryItem {
	for i := range m.items {
		it := &m.items[i]
		slices.SortStableFunc(it.Points, func(a, b HistoryPoint) int { return strings.Compare(a.Date, b.Date) })
		if !m.merged[i] {
			continue
		}
		out := it.Points[:0]
		for _, p := range it.Points {
			if n := len(out); n > 0 && out[n-1].Date == p.Date {
				out[n-1] = p
				continue
			}
			out = append(out, p)
		}
		it.Points = out
		raws := make([]json.RawMessage, len(out))
		for j, p := range out {
			raws[j] = p.Raw
		}
		f := m.raws[i]
		if list, err := json.Marshal(raws); err == nil {
			f["dataList"] = list
			if b, err := json.Marshal(f); err == nil {
				it.Raw = b
			}
		}
	}
	return m.items
}
