package sim

import (
	"math"
	"time"
)

// maxPageSize is the largest getAlarmList page.
const maxPageSize = 500

func (s *Server) idShape(key string) bool { return s.opts.IDs.numeric(key, bitIDs) }

func (s *Server) stationState(st *station, states assetStates) []map[string]any {
	op := map[string]any{"key": 5000, "value": "normal"}
	if states.st[st.idx] > 0 {
		op = map[string]any{"key": 3001, "value": "device fault"}
	} else {
		for _, d := range s.fleet.devices {
			if d.station == st && d.baseState == "1005" {
				op = map[string]any{"key": 3002, "value": "communication abnormal"}
				break
			}
		}
	}
	return []map[string]any{op, {"key": 4000, "value": "safe"}}
}

func systemState(sy *system, states assetStates) (string, string) {
	if states.sys[sy.idx] > 0 {
		return "abnormal", "Abnormal"
	}
	return "normal", "Normal"
}

func deviceState(d *device, states assetStates) (string, string) {
	code := d.baseState
	if states.dev[d.idx] > 0 {
		code = "1002"
	}
	return code, deviceStates[code]
}

func (s *Server) stationList(p params, now time.Time) (any, *apiError) {
	if _, aerr := p.flag("isGetFirmwareVersion"); aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := make([]map[string]any, 0, len(s.fleet.stations))
	for _, st := range s.fleet.stations {
		num := s.idShape(st.id)
		rec := map[string]any{
			"tenantId": idValue(st.tenantID, num), "id": idValue(st.id, num), "name": st.name,
			"templateCode": st.templateCode, "templateType": st.templateType,
			"templateCategory": st.templateCategory, "sn": st.sn, "nodeId": st.nodeID,
			"isShared": st.shared, "state": s.stationState(st, states),
		}
		if st.idx%2 == 0 {
			rec["code"] = st.sn
		}
		list = append(list, rec)
	}
	return map[string]any{"dataList": list}, nil
}

func (s *Server) systemList(p params, now time.Time) (any, *apiError) {
	if _, aerr := p.flag("isGetFirmwareVersion"); aerr != nil {
		return nil, aerr
	}
	scope, aerr := p.assetScope()
	if aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := make([]map[string]any, 0, len(s.fleet.systems))
	for _, sy := range s.fleet.systems {
		if !inScope(scope, sy.shared) {
			continue
		}
		num := s.idShape(sy.id)
		state, name := systemState(sy, states)
		list = append(list, map[string]any{
			"tenantId": idValue(sy.tenantID, num), "id": idValue(sy.id, num), "name": sy.name,
			"templateCode": sy.templateCode, "templateType": sy.templateType, "code": sy.code,
			"nodeId": sy.nodeID, "stationId": idValue(sy.station.id, num), "isShared": sy.shared,
			"state": state, "stateName": name,
		})
	}
	return map[string]any{"dataList": list}, nil
}

// deviceQuery is the common part of the two device list requests.
type deviceQuery struct {
	firmware bool
	types    map[string]bool
}

func parseDeviceQuery(p params) (deviceQuery, *apiError) {
	firmware, aerr := p.flag("isGetFirmwareVersion")
	if aerr != nil {
		return deviceQuery{}, aerr
	}
	types, _, aerr := p.strs("deviceTypes")
	if aerr != nil {
		return deviceQuery{}, aerr
	}
	for _, t := range types {
		if templates[t] == nil {
			return deviceQuery{}, errorf(CodeOutOfRange, "deviceTypes: unknown device type %q", t)
		}
	}
	return deviceQuery{firmware: firmware, types: set(types)}, nil
}

// deviceRecord is a device as the device lists write it; the station list
// variant carries code, templateType and extraInfoList instead of isShared.
func (s *Server) deviceRecord(d *device, states assetStates, q deviceQuery, stationVariant bool) map[string]any {
	num := s.idShape(d.id)
	state, name := deviceState(d, states)
	rec := map[string]any{
		"id": idValue(d.id, num), "tenantId": idValue(d.tenantID, num), "name": d.name, "sn": d.sn,
		"templateCode": d.tmpl.code, "state": state, "stateName": name,
		"stationId": idValue(d.station.id, num), "systemId": idValue(d.system.id, num),
		"attributeValues": d.attrs,
	}
	if d.nodeID != "" {
		rec["nodeId"] = d.nodeID
	}
	if stationVariant {
		rec["code"], rec["templateType"], rec["extraInfoList"] = d.code, d.tmpl.typ, []extraInfo{}
	} else {
		rec["isShared"] = d.shared
	}
	if q.firmware {
		rec["firmwareVersion"] = d.firmware
	}
	return rec
}

func (s *Server) deviceListData(list []map[string]any) any {
	if s.opts.DeviceListInDataList {
		return map[string]any{"dataList": list}
	}
	return list
}

func (s *Server) deviceList(p params, now time.Time) (any, *apiError) {
	q, aerr := parseDeviceQuery(p)
	if aerr != nil {
		return nil, aerr
	}
	scope, aerr := p.assetScope()
	if aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	for _, d := range s.fleet.devices {
		if inScope(scope, d.shared) && (q.types == nil || q.types[d.tmpl.code]) {
			list = append(list, s.deviceRecord(d, states, q, false))
		}
	}
	return s.deviceListData(list), nil
}

func (s *Server) stationDevices(p params, now time.Time) (any, *apiError) {
	id, ok, aerr := p.str("stationId")
	if aerr == nil && (!ok || id == "") {
		aerr = errorf(CodeBadParameter, "parameter stationId is required")
	}
	if aerr != nil {
		return nil, aerr
	}
	q, aerr := parseDeviceQuery(p)
	if aerr != nil {
		return nil, aerr
	}
	states := s.eng.states(now)
	list := []map[string]any{}
	for _, d := range s.fleet.devices {
		if d.station.id == id && (q.types == nil || q.types[d.tmpl.code]) {
			list = append(list, s.deviceRecord(d, states, q, true))
		}
	}
	return s.deviceListData(list), nil
}

func (s *Server) stationDetail(p params, _ time.Time) (any, *apiError) {
	id, ok, aerr := p.str("stationId")
	if aerr == nil && (!ok || id == "") {
		aerr = errorf(CodeBadParameter, "parameter stationId is required")
	}
	if aerr != nil {
		return nil, aerr
	}
	st := s.fleet.stationByID[id]
	if st == nil {
		return nil, errorf(CodeOutOfRange, "stationId %q is not a station of this tenant", id)
	}
	num := s.idShape(st.id)
	return map[string]any{
		"tenantId": idValue(st.tenantID, num), "id": idValue(st.id, num), "name": st.name,
		"sn": st.sn, "nodeId": st.nodeID, "attributeValues": st.attrs, "extraInfoList": st.extra,
	}, nil
}

// wireAlarm is an alarm record as getAlarmList writes it.
type wireAlarm struct {
	OriginID                 any    `json:"originId"`
	KafkaUUID                string `json:"kafkaUuid"`
	TenantID                 any    `json:"tenantId"`
	TenantName               string `json:"tenantName"`
	DeviceID                 any    `json:"deviceId"`
	DeviceSN                 string `json:"deviceSn"`
	DeviceName               string `json:"deviceName"`
	DeviceTemplateType       string `json:"deviceTemplateType"`
	DeviceTemplateCode       string `json:"deviceTemplateCode"`
	SystemID                 any    `json:"systemId"`
	SystemCode               string `json:"systemCode"`
	SystemName               string `json:"systemName"`
	StationID                any    `json:"stationId"`
	StationCode              string `json:"stationCode"`
	StationName              string `json:"stationName"`
	OccurrenceTime           any    `json:"occurrenceTime"`
	OccurrenceTimeStr        string `json:"occurrenceTimeStr"`
	RecoveryTime             any    `json:"recoveryTime"`
	RecoveryTimeStr          any    `json:"recoveryTimeStr"`
	DurationTp               any    `json:"durationTp"`
	Status                   int    `json:"status"`
	EventCode                string `json:"eventCode"`
	EventDesc                string `json:"eventDesc"`
	EventType                string `json:"eventType"`
	EventLevel               int    `json:"eventLevel"`
	EventCategoryCode        string `json:"eventCategoryCode"`
	EventCategoryDescription string `json:"eventCategoryDescription"`
	EventCategoryInfluence   string `json:"eventCategoryInfluence"`
	EventTagNameStr          string `json:"eventTagNameStr"`
	EventTagCodeStr          string `json:"eventTagCodeStr"`
	Payload                  string `json:"payload"`
	Note                     string `json:"note"`
}

// toWire writes v; an ongoing alarm has null recoveryTime, recoveryTimeStr
// and durationTp.
func (s *Server) toWire(v Alarm) wireAlarm {
	num, numTime := s.idShape(v.OriginID), s.opts.Timestamps.numeric(v.OriginID, bitTimes)
	w := wireAlarm{
		OriginID: idValue(v.OriginID, num), KafkaUUID: v.KafkaUUID,
		TenantID: idValue(v.TenantID, num), TenantName: v.TenantName,
		DeviceID: idValue(v.DeviceID, num), DeviceSN: v.DeviceSN, DeviceName: v.DeviceName,
		DeviceTemplateType: v.DeviceTemplateType, DeviceTemplateCode: v.DeviceTemplateCode,
		SystemID: idValue(v.SystemID, num), SystemCode: v.SystemCode, SystemName: v.SystemName,
		StationID: idValue(v.StationID, num), StationCode: v.StationCode, StationName: v.StationName,
		OccurrenceTime:    msValue(v.OccurredAt.UnixMilli(), numTime),
		OccurrenceTimeStr: formatUpstream(v.OccurredAt),
		Status:            int(v.Status), EventCode: v.EventCode, EventDesc: v.EventDesc, EventType: v.EventType,
		EventLevel: v.Level, EventCategoryCode: v.CategoryCode, EventCategoryDescription: v.CategoryDescription,
		EventCategoryInfluence: v.CategoryInfluence, EventTagNameStr: v.TagNames, EventTagCodeStr: v.TagCodes,
		Payload: v.Payload, Note: v.Note,
	}
	if !v.RecoveredAt.IsZero() {
		w.RecoveryTime = msValue(v.RecoveredAt.UnixMilli(), numTime)
		w.RecoveryTimeStr = formatUpstream(v.RecoveredAt)
		w.DurationTp = msValue(v.RecoveredAt.Sub(v.OccurredAt).Milliseconds(), numTime)
	}
	return w
}

func (s *Server) alarmList(p params, now time.Time) (any, *apiError) {
	required := func(name string) (int64, *apiError) {
		v, ok, aerr := p.int64(name)
		if aerr == nil && !ok {
			aerr = errorf(CodeBadParameter, "parameter %s is required", name)
		}
		return v, aerr
	}
	var vals [4]int64
	for i, name := range []string{"current", "size", "startTime", "endTime"} {
		v, aerr := required(name)
		if aerr != nil {
			return nil, aerr
		}
		vals[i] = v
	}
	current, size, from, to := vals[0], vals[1], vals[2], vals[3]
	switch {
	case current < 1:
		return nil, errorf(CodeOutOfRange, "current must be at least 1, got %d", current)
	case size < 1 || size > maxPageSize:
		return nil, errorf(CodeOutOfRange, "size must be 1..%d, got %d", maxPageSize, size)
	case from > to:
		return nil, errorf(CodeOutOfRange, "startTime %d is after endTime %d", from, to)
	case current > math.MaxInt32:
		return nil, errorf(CodeOutOfRange, "current %d is too large", current)
	}
	q := alarmQuery{from: from, to: to, offset: int((current - 1) * size), size: int(size)}
	var aerr *apiError
	if q.recovery, _, aerr = p.boolean("isRecovery"); aerr != nil {
		return nil, aerr
	}
	var filters [4]map[string]bool // stations, systems, device sns, device types
	for i, f := range []struct {
		name string
		read func(string) ([]string, bool, *apiError)
	}{{"stationIdList", p.longs}, {"systemIdList", p.longs}, {"deviceSnList", p.strs}, {"deviceTemplateCodes", p.strs}} {
		list, _, aerr := f.read(f.name)
		if aerr != nil {
			return nil, aerr
		}
		filters[i] = set(list)
		if lim := s.opts.Hostile.DeviceSNListLimit; i == 2 && lim > 0 && len(list) > lim {
			return nil, errorf(CodeOutOfRange, "deviceSnList: at most %d devices, got %d", lim, len(list))
		}
	}
	for t := range filters[3] {
		if templates[t] == nil {
			return nil, errorf(CodeOutOfRange, "deviceTemplateCodes: unknown device type %q", t)
		}
	}
	q.devices = s.fleet.selectDevices(filters)
	codes, _, aerr := p.strs("eventCodes")
	if aerr != nil {
		return nil, aerr
	}
	q.codes = set(codes)
	levels, _, aerr := p.ints("eventLevels")
	if aerr != nil {
		return nil, aerr
	}
	for _, l := range levels {
		if l < 0 || l > 3 {
			return nil, errorf(CodeOutOfRange, "eventLevels: level %d is not 0..3", l)
		}
		q.levels[l] = true
	}
	if len(levels) == 0 || s.opts.Hostile.IgnoreLevels {
		q.levels = [4]bool{true, true, true, true}
	}
	var (
		total  int
		page   []alarm
		shifts []int64
	)
	if s.skewed() {
		total, page, shifts = s.eng.pageSkewed(now, q, s.views(now), s.opts.Hostile.FilterOnRecovery, s.recoveredOrder())
	} else {
		total, page = s.eng.page(now, q)
	}
	if c := s.opts.Hostile.PageCap; c > 0 && len(page) > c {
		page = page[:c]
	}
	total = max(0, total+s.opts.Hostile.TotalOffset)
	if len(page) > 0 && s.faults.takeDrop() {
		s.traffic.record(EndpointAlarmList, outcomeFault)
		i := len(page) / 2
		page = append(page[:i], page[i+1:]...)
		if shifts != nil {
			shifts = append(shifts[:i], shifts[i+1:]...)
		}
	}
	list := make([]wireAlarm, len(page))
	for i, a := range page {
		v := s.eng.view(a)
		if shifts != nil {
			d := time.Duration(shifts[i]) * time.Millisecond
			v.OccurredAt = v.OccurredAt.Add(d)
			if !v.RecoveredAt.IsZero() {
				v.RecoveredAt = v.RecoveredAt.Add(d)
			}
		}
		if s.hostile.pad != "" {
			v.Payload = s.hostile.pad
		}
		list[i] = s.toWire(v)
	}
	return map[string]any{
		"current": current, "size": size, "total": total,
		"pages": (int64(total) + size - 1) / size, "dataList": list,
	}, nil
}
