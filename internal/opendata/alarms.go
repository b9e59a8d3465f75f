package opendata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// maxPageSize is the largest alarm page the upstream serves.
const maxPageSize = 500

// MaxOriginIDLen is the longest originId, in bytes, an alarm record may
// have. A longer one cannot be a key of the store (bbolt refuses keys
// over 32 KiB, which would fail every batch holding it); such a record is
// skipped.
const MaxOriginIDLen = 256

// AlarmQuery asks getAlarmList for alarms. Start is required; every other
// field has a default or may be empty.
type AlarmQuery struct {
	// Page is the 1-based page number; default 1.
	Page int
	// Size is the page size; default 500. A size above the upstream's 500
	// is served by several upstream pages merged into one.
	Size int
	// Start and End bound the time window; End defaults to now.
	Start, End time.Time
	// StationIDs, SystemIDs and DeviceSNs restrict the alarms to those
	// assets.
	StationIDs []string
	SystemIDs  []string
	DeviceSNs  []string
	// Recovered asks for history alarms (isRecovery=true) instead of
	// ongoing ones.
	Recovered bool
	// Levels restricts the event levels, each 0 (urgent) to 3 (minor).
	Levels []int
	// EventCodes and DeviceTemplateCodes restrict the event codes and the
	// device types.
	EventCodes          []string
	DeviceTemplateCodes []string
}

// AlarmPage is a page of alarms, or several pages merged.
type AlarmPage struct {
	// Current and Size are the page number and size asked for; Total is
	// the upstream's total of matching alarms, from the last page read.
	Current int `json:"current"`
	Size    int `json:"size"`
	Total   int `json:"total"`
	// Alarms holds the records in upstream order, one per originId: when
	// pages overlap, the later record replaces the earlier in place.
	Alarms []event.Alarm `json:"alarms"`
	// Pages is how many upstream pages were read for this answer.
	Pages int `json:"pages"`
	// Rows counts the records of the upstream pages read, usable or not and
	// duplicates included: what the upstream's total counts.
	Rows int `json:"rows"`
	// Skipped counts records left out because they had no originId, an
	// originId longer than MaxOriginIDLen, or no status of 1, 0 or -1.
	Skipped int `json:"skipped"`
	// SkippedIDs holds the originIds of the skipped records that had a
	// usable originId but no valid status: upstream lists these alarms,
	// though they cannot be applied.
	SkippedIDs []string `json:"skippedIds"`
	// Complete reports that this answer is the whole set of matching
	// records: it starts at the first record, total did not change across
	// the pages read, and Rows equals total. Skipped records do not make an
	// answer incomplete: they were read, only not used.
	Complete bool `json:"complete"`
}

// AlarmPage fetches one page of alarms. A Size above 500 costs several
// upstream requests, merged.
func (c *Client) AlarmPage(ctx context.Context, q AlarmQuery) (*AlarmPage, error) {
	return c.alarms(ctx, q, false)
}

// Alarms fetches every page from q.Page on and merges them into one answer.
// It stops after the last page the latest total calls for, or at an empty
// page.
func (c *Client) Alarms(ctx context.Context, q AlarmQuery) (*AlarmPage, error) {
	return c.alarms(ctx, q, true)
}

// alarms reads the records of page q.Page of size q.Size (or, with all, every
// record from there on) in upstream pages of at most 500, and merges them.
func (c *Client) alarms(ctx context.Context, q AlarmQuery, all bool) (*AlarmPage, error) {
	q, err := c.normalizeAlarmQuery(q)
	if err != nil {
		return nil, err
	}
	up := min(q.Size, maxPageSize)
	first := (q.Page - 1) * q.Size // 0-based index of the first record asked for
	lastPage := (q.Page*q.Size + up - 1) / up
	m := newAlarmMerge(q.Page, q.Size, first == 0)
	for p := first/up + 1; all || p <= lastPage; p++ {
		page, err := c.alarmPage(ctx, q, p, up)
		if err != nil {
			return nil, err
		}
		m.add(page)
		if page.Rows == 0 || p*up >= page.Total {
			break
		}
	}
	skip := min(first%up, len(m.page.Alarms))
	m.page.Alarms = m.page.Alarms[skip:]
	if !all && len(m.page.Alarms) > q.Size {
		m.page.Alarms = m.page.Alarms[:q.Size]
		m.whole = false
	}
	return m.result(), nil
}

func (c *Client) normalizeAlarmQuery(q AlarmQuery) (AlarmQuery, error) {
	bad := func(format string, args ...any) (AlarmQuery, error) {
		return q, &Error{Endpoint: endpointAlarms, Kind: KindBadRequest, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case q.Page < 0:
		return bad("page %d: want 1 or more", q.Page)
	case q.Page == 0:
		q.Page = 1
	}
	switch {
	case q.Size < 0:
		return bad("page size %d: want 1 to %d", q.Size, maxPageSize)
	case q.Size == 0:
		q.Size = maxPageSize
	}
	if q.Start.IsZero() {
		return bad("the start of the time window is required")
	}
	if q.End.IsZero() {
		q.End = c.clock.Now()
	}
	if q.End.Before(q.Start) {
		return bad("time window %s to %s ends before it starts",
			q.Start.UTC().Format(time.RFC3339), q.End.UTC().Format(time.RFC3339))
	}
	for _, l := range q.Levels {
		if l < 0 || l > 3 {
			return bad("event level %d: want 0 to 3", l)
		}
	}
	return q, nil
}

// alarmPage sends one getAlarmList request; size is at most 500.
func (c *Client) alarmPage(ctx context.Context, q AlarmQuery, page, size int) (*AlarmPage, error) {
	body := map[string]any{
		"current":    page,
		"size":       size,
		"startTime":  q.Start.UnixMilli(),
		"endTime":    q.End.UnixMilli(),
		"isRecovery": q.Recovered,
	}
	putList(body, "stationIdList", longs(q.StationIDs))
	putList(body, "systemIdList", longs(q.SystemIDs))
	putList(body, "deviceSnList", q.DeviceSNs)
	putList(body, "eventLevels", q.Levels)
	putList(body, "eventCodes", q.EventCodes)
	putList(body, "deviceTemplateCodes", q.DeviceTemplateCodes)
	data, err := c.call(ctx, endpointAlarms, body)
	if err != nil {
		return nil, err
	}
	p, err := decodeAlarmData(data, c.loc)
	if err != nil {
		return nil, &Error{Endpoint: endpointAlarms, Kind: KindTransient, Err: err}
	}
	if p.Skipped > 0 {
		// A bad row upstream stays there for a while: warn when the rows
		// change, not at every poll.
		level := slog.LevelDebug
		key := fmt.Sprint(p.Skipped, p.SkippedIDs)
		c.mu.Lock()
		if key != c.lastSkipped {
			c.lastSkipped, level = key, slog.LevelWarn
		}
		c.mu.Unlock()
		c.log.Log(ctx, level, "upstream alarm records skipped: no originId, an originId over the length limit, or no valid status",
			"endpoint", endpointAlarms, "page", page, "skipped", p.Skipped, "skipped_ids", p.SkippedIDs,
			"max_origin_id_bytes", MaxOriginIDLen)
	}
	return p, nil
}

// decodeAlarmData decodes the data object of a getAlarmList answer into a
// page (Complete is left to the merge). Records without a usable originId or
// a valid status are counted in Skipped, not decoded; the originIds of those
// with a usable originId are kept in SkippedIDs.
func decodeAlarmData(data json.RawMessage, loc *time.Location) (*AlarmPage, error) {
	f, err := objectFields(data)
	if err != nil {
		return nil, fmt.Errorf("alarm list data: %w", err)
	}
	total, ok := f.int("total")
	if !ok || total < 0 {
		return nil, errors.New("alarm list data: total is missing or not a count")
	}
	list, present := f["dataList"]
	items := arrayOf(list)
	if items == nil && present && scalarText(list) != "" {
		return nil, errors.New("alarm list data: dataList is not a list")
	}
	p := &AlarmPage{
		Current: f.intOr("current", 0),
		Size:    f.intOr("size", 0),
		Total:   total,
		Alarms:  make([]event.Alarm, 0, len(items)),
		Pages:   1,
		Rows:    len(items),
	}
	for _, item := range items {
		a, ok := decodeAlarm(item, loc)
		if !ok {
			p.Skipped++
			if a.OriginID != "" {
				p.SkippedIDs = append(p.SkippedIDs, a.OriginID)
			}
			continue
		}
		p.Alarms = append(p.Alarms, a)
	}
	return p, nil
}

// decodeAlarm decodes one alarm record; ok is false when it has no originId,
// an originId longer than MaxOriginIDLen, or no status of 1, 0 or -1. When
// only the status is wrong, the returned alarm holds the originId alone.
// Level is -1 when the record has none.
func decodeAlarm(raw json.RawMessage, loc *time.Location) (event.Alarm, bool) {
	f, err := objectFields(raw)
	if err != nil {
		return event.Alarm{}, false
	}
	id := f.str("originId")
	if id == "" || len(id) > MaxOriginIDLen {
		return event.Alarm{}, false
	}
	status, ok := f.int("status")
	if !ok {
		return event.Alarm{OriginID: id}, false
	}
	if _, valid := event.ForStatus(status); !valid {
		return event.Alarm{OriginID: id}, false
	}
	return event.Alarm{
		OriginID:           id,
		Status:             status,
		Level:              f.intOr("eventLevel", -1),
		EventCode:          f.str("eventCode"),
		EventDesc:          f.str("eventDesc"),
		EventType:          f.str("eventType"),
		TenantID:           f.str("tenantId"),
		TenantName:         f.str("tenantName"),
		StationID:          f.str("stationId"),
		StationName:        f.str("stationName"),
		SystemID:           f.str("systemId"),
		DeviceID:           f.str("deviceId"),
		DeviceSN:           f.str("deviceSn"),
		DeviceName:         f.str("deviceName"),
		DeviceTemplateCode: f.str("deviceTemplateCode"),
		OccurredAt:         f.timeOf("occurrenceTime", "occurrenceTimeStr", loc),
		RecoveredAt:        f.timeOf("recoveryTime", "recoveryTimeStr", loc),
		Raw:                json.RawMessage(append([]byte(nil), raw...)),
	}, true
}

// alarmMerge merges pages into one answer.
type alarmMerge struct {
	page   AlarmPage
	index  map[string]int
	stable bool
	// whole says the answer starts at the first record and keeps every
	// record read.
	whole bool
}

func newAlarmMerge(current, size int, fromFirst bool) *alarmMerge {
	return &alarmMerge{
		page:   AlarmPage{Current: current, Size: size, Total: -1},
		index:  map[string]int{},
		stable: true,
		whole:  fromFirst,
	}
}

func (m *alarmMerge) add(p *AlarmPage) {
	if m.page.Total >= 0 && p.Total != m.page.Total {
		m.stable = false
	}
	m.page.Total = p.Total
	m.page.Pages += p.Pages
	m.page.Rows += p.Rows
	m.page.Skipped += p.Skipped
	m.page.SkippedIDs = append(m.page.SkippedIDs, p.SkippedIDs...)
	for _, a := range p.Alarms {
		if i, ok := m.index[a.OriginID]; ok {
			m.page.Alarms[i] = a
			continue
		}
		m.index[a.OriginID] = len(m.page.Alarms)
		m.page.Alarms = append(m.page.Alarms, a)
	}
}

func (m *alarmMerge) result() *AlarmPage {
	p := m.page
	if p.Total < 0 {
		p.Total = 0
	}
	p.Complete = m.stable && m.whole && p.Rows == p.Total
	return &p
}
