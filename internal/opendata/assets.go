package opendata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The spec's names of the endpoints, as used in errors, logs and metrics.
const (
	endpointLogin          = "login"
	endpointStations       = "getTenantStationList"
	endpointSystems        = "getTenantSystemList"
	endpointDevices        = "getTenantDeviceList"
	endpointStationDevices = "getStationDeviceList"
	endpointStationDetail  = "getStationDetail"
	endpointAlarms         = "getAlarmList"
	endpointRealTime       = "getDeviceRealTimeData"
	endpointSystemHistory  = "getSystemPointsDayMonthYearDataList"
	endpointStationHistory = "getStationPointsDayMonthYearDataList"
	endpointDeviceHistory  = "getDevicePointsDayMonthYearDataList"
)

// AssetScope selects owned or shared assets in the tenant lists. The zero
// value sends nothing, which the upstream reads as ScopeOwned.
type AssetScope int

// The asset scopes.
const (
	// ScopeDefault sends no assetScope: the upstream's default, owned.
	ScopeDefault AssetScope = iota
	// ScopeAll is every asset: owned and shared (assetScope 0).
	ScopeAll
	// ScopeOwned is the tenant's own assets (assetScope 1).
	ScopeOwned
	// ScopeShared is the assets other tenants share with this one
	// (assetScope 2).
	ScopeShared
)

func (s AssetScope) put(body map[string]any) error {
	switch s {
	case ScopeDefault:
	case ScopeAll, ScopeOwned, ScopeShared:
		body["assetScope"] = int(s) - 1
	default:
		return fmt.Errorf("asset scope %d: want ScopeAll, ScopeOwned or ScopeShared", int(s))
	}
	return nil
}

// StateItem is one {key, value} state of a station.
type StateItem struct {
	Key   int    `json:"key"`
	Value string `json:"value"`
}

// Attribute is one attribute of a station or device.
type Attribute struct {
	Code      string `json:"code"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueName string `json:"valueName"`
}

// ExtraInfo is one {extraKey, extraValue} item of a station's extra
// information, such as geoInfo.
type ExtraInfo struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Station is an item of the tenant station list.
type Station struct {
	TenantID         string `json:"tenantId"`
	ID               string `json:"id"`
	Name             string `json:"name"`
	TemplateCode     string `json:"templateCode"`
	TemplateType     string `json:"templateType"`
	TemplateCategory string `json:"templateCategory"`
	// Code is the station code; the upstream may send it as sn instead,
	// and then Code holds that too.
	Code     string      `json:"code"`
	SN       string      `json:"sn"`
	NodeID   string      `json:"nodeId"`
	IsShared bool        `json:"isShared"`
	State    []StateItem `json:"state"`
	// Raw is the record as received.
	Raw json.RawMessage `json:"raw"`
}

// System is an item of the tenant system list.
type System struct {
	TenantID     string `json:"tenantId"`
	ID           string `json:"id"`
	Name         string `json:"name"`
	TemplateCode string `json:"templateCode"`
	TemplateType string `json:"templateType"`
	Code         string `json:"code"`
	NodeID       string `json:"nodeId"`
	StationID    string `json:"stationId"`
	IsShared     bool   `json:"isShared"`
	// State is normal or abnormal.
	State     string `json:"state"`
	StateName string `json:"stateName"`
	// Raw is the record as received.
	Raw json.RawMessage `json:"raw"`
}

// Device is an item of the tenant or station device list.
type Device struct {
	ID           string `json:"id"`
	TenantID     string `json:"tenantId"`
	Name         string `json:"name"`
	SN           string `json:"sn"`
	Code         string `json:"code"`
	TemplateCode string `json:"templateCode"`
	TemplateType string `json:"templateType"`
	// NodeID is the id real-time and history queries take; devices
	// without one have no point data.
	NodeID     string      `json:"nodeId"`
	State      string      `json:"state"`
	StateName  string      `json:"stateName"`
	StationID  string      `json:"stationId"`
	SystemID   string      `json:"systemId"`
	IsShared   bool        `json:"isShared"`
	Attributes []Attribute `json:"attributes"`
	// ExtraInfo holds the extraInfoList entries as received.
	ExtraInfo []json.RawMessage `json:"extraInfo"`
	// Raw is the record as received.
	Raw json.RawMessage `json:"raw"`
}

// StationDetail is the answer of getStationDetail.
type StationDetail struct {
	TenantID   string      `json:"tenantId"`
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	SN         string      `json:"sn"`
	NodeID     string      `json:"nodeId"`
	Attributes []Attribute `json:"attributes"`
	ExtraInfo  []ExtraInfo `json:"extraInfo"`
	// Raw is the data object as received.
	Raw json.RawMessage `json:"raw"`
}

// StationListQuery asks for the tenant's stations.
type StationListQuery struct {
	// FirmwareVersion asks for firmware information (isGetFirmwareVersion).
	FirmwareVersion bool
}

// SystemListQuery asks for the tenant's systems.
type SystemListQuery struct {
	FirmwareVersion bool
	AssetScope      AssetScope
}

// DeviceListQuery asks for the tenant's devices.
type DeviceListQuery struct {
	FirmwareVersion bool
	// DeviceTypes restricts the templateCode, such as Inverter; empty
	// means every type.
	DeviceTypes []string
	AssetScope  AssetScope
}

// StationDevicesQuery asks for the devices of one station.
type StationDevicesQuery struct {
	// StationID is required.
	StationID       string
	FirmwareVersion bool
	DeviceTypes     []string
}

// TenantStations lists the tenant's stations.
func (c *Client) TenantStations(ctx context.Context, q StationListQuery) ([]Station, error) {
	body := map[string]any{"isGetFirmwareVersion": flag01(q.FirmwareVersion)}
	items, err := c.list(ctx, endpointStations, body)
	if err != nil {
		return nil, err
	}
	out := make([]Station, 0, len(items))
	for _, raw := range items {
		f, ok := recordFields(raw)
		if !ok {
			continue
		}
		s := Station{
			TenantID:         f.str("tenantId"),
			ID:               f.str("id"),
			Name:             f.str("name"),
			TemplateCode:     f.str("templateCode"),
			TemplateType:     f.str("templateType"),
			TemplateCategory: f.str("templateCategory"),
			Code:             f.str("code"),
			SN:               f.str("sn"),
			NodeID:           f.str("nodeId"),
			IsShared:         f.bool("isShared"),
			State:            stateItems(f.list("state")),
			Raw:              cloneRaw(raw),
		}
		if s.Code == "" {
			s.Code = s.SN
		}
		out = append(out, s)
	}
	return out, nil
}

// TenantSystems lists the tenant's systems.
func (c *Client) TenantSystems(ctx context.Context, q SystemListQuery) ([]System, error) {
	body := map[string]any{"isGetFirmwareVersion": flag01(q.FirmwareVersion)}
	if err := q.AssetScope.put(body); err != nil {
		return nil, &Error{Endpoint: endpointSystems, Kind: KindBadRequest, Err: err}
	}
	items, err := c.list(ctx, endpointSystems, body)
	if err != nil {
		return nil, err
	}
	out := make([]System, 0, len(items))
	for _, raw := range items {
		f, ok := recordFields(raw)
		if !ok {
			continue
		}
		out = append(out, System{
			TenantID:     f.str("tenantId"),
			ID:           f.str("id"),
			Name:         f.str("name"),
			TemplateCode: f.str("templateCode"),
			TemplateType: f.str("templateType"),
			Code:         f.str("code"),
			NodeID:       f.str("nodeId"),
			StationID:    f.str("stationId"),
			IsShared:     f.bool("isShared"),
			State:        f.str("state"),
			StateName:    f.str("stateName"),
			Raw:          cloneRaw(raw),
		})
	}
	return out, nil
}

// TenantDevices lists the tenant's devices.
func (c *Client) TenantDevices(ctx context.Context, q DeviceListQuery) ([]Device, error) {
	body := map[string]any{"isGetFirmwareVersion": fmt.Sprint(flag01(q.FirmwareVersion))}
	putList(body, "deviceTypes", q.DeviceTypes)
	if err := q.AssetScope.put(body); err != nil {
		return nil, &Error{Endpoint: endpointDevices, Kind: KindBadRequest, Err: err}
	}
	items, err := c.list(ctx, endpointDevices, body)
	if err != nil {
		return nil, err
	}
	return devices(items), nil
}

// StationDevices lists the devices of one station.
func (c *Client) StationDevices(ctx context.Context, q StationDevicesQuery) ([]Device, error) {
	if strings.TrimSpace(q.StationID) == "" {
		return nil, &Error{Endpoint: endpointStationDevices, Kind: KindBadRequest, Err: errors.New("station id is required")}
	}
	body := map[string]any{
		"stationId":            q.StationID,
		"isGetFirmwareVersion": fmt.Sprint(flag01(q.FirmwareVersion)),
	}
	putList(body, "deviceTypes", q.DeviceTypes)
	items, err := c.list(ctx, endpointStationDevices, body)
	if err != nil {
		return nil, err
	}
	return devices(items), nil
}

// StationDetail returns the detail of one station.
func (c *Client) StationDetail(ctx context.Context, stationID string) (*StationDetail, error) {
	if strings.TrimSpace(stationID) == "" {
		return nil, &Error{Endpoint: endpointStationDetail, Kind: KindBadRequest, Err: errors.New("station id is required")}
	}
	data, err := c.call(ctx, endpointStationDetail, map[string]any{"stationId": stationID})
	if err != nil {
		return nil, err
	}
	f, err := objectFields(data)
	if err != nil {
		return nil, &Error{Endpoint: endpointStationDetail, Kind: KindTransient, Err: fmt.Errorf("data: %w", err)}
	}
	d := &StationDetail{
		TenantID:   f.str("tenantId"),
		ID:         f.str("id"),
		Name:       f.str("name"),
		SN:         f.str("sn"),
		NodeID:     f.str("nodeId"),
		Attributes: attributes(f.list("attributeValues")),
		Raw:        cloneRaw(data),
	}
	for _, raw := range f.list("extraInfoList") {
		if e, err := objectFields(raw); err == nil {
			d.ExtraInfo = append(d.ExtraInfo, ExtraInfo{Key: e.str("extraKey"), Value: e.str("extraValue")})
		}
	}
	return d, nil
}

// list calls a list endpoint and returns its records, from data.dataList or
// from an array directly in data: the spec shows both shapes for the device
// lists, and accepting both everywhere costs nothing.
func (c *Client) list(ctx context.Context, endpoint string, body map[string]any) ([]json.RawMessage, error) {
	data, err := c.call(ctx, endpoint, body)
	if err != nil {
		return nil, err
	}
	items, err := listItems(data)
	if err != nil {
		return nil, &Error{Endpoint: endpoint, Kind: KindTransient, Err: err}
	}
	return items, nil
}

// listItems finds the records of a list answer's data.
func listItems(data json.RawMessage) ([]json.RawMessage, error) {
	if t := strings.TrimSpace(string(data)); t == "" || t == "null" {
		return nil, nil
	}
	if items := arrayOf(data); items != nil {
		return items, nil
	}
	f, err := objectFields(data)
	if err != nil {
		return nil, errors.New("data is neither a list nor an object with dataList")
	}
	list, ok := f["dataList"]
	if !ok || strings.TrimSpace(string(list)) == "null" {
		return nil, nil
	}
	items := arrayOf(list)
	if items == nil {
		return nil, errors.New("data.dataList is not a list")
	}
	return items, nil
}

// recordFields decodes one list record; records that are not objects are
// left out of the answer.
func recordFields(raw json.RawMessage) (fields, bool) {
	f, err := objectFields(raw)
	return f, err == nil
}

func devices(items []json.RawMessage) []Device {
	out := make([]Device, 0, len(items))
	for _, raw := range items {
		f, ok := recordFields(raw)
		if !ok {
			continue
		}
		out = append(out, Device{
			ID:           f.str("id"),
			TenantID:     f.str("tenantId"),
			Name:         f.str("name"),
			SN:           f.str("sn"),
			Code:         f.str("code"),
			TemplateCode: f.str("templateCode"),
			TemplateType: f.str("templateType"),
			NodeID:       f.str("nodeId"),
			State:        f.str("state"),
			StateName:    f.str("stateName"),
			StationID:    f.str("stationId"),
			SystemID:     f.str("systemId"),
			IsShared:     f.bool("isShared"),
			Attributes:   attributes(f.list("attributeValues")),
			ExtraInfo:    f.list("extraInfoList"),
			Raw:          cloneRaw(raw),
		})
	}
	return out
}

func attributes(items []json.RawMessage) []Attribute {
	var out []Attribute
	for _, raw := range items {
		if f, err := objectFields(raw); err == nil {
			out = append(out, Attribute{
				Code:      f.str("attributeCode"),
				Name:      f.str("attributeName"),
				Value:     f.str("attributeValue"),
				ValueName: f.str("attributeValueName"),
			})
		}
	}
	return out
}

func stateItems(items []json.RawMessage) []StateItem {
	var out []StateItem
	for _, raw := range items {
		if f, err := objectFields(raw); err == nil {
			out = append(out, StateItem{Key: f.intOr("key", 0), Value: f.str("value")})
		}
	}
	return out
}

func flag01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// putList sets body[key] to list unless it is empty.
func putList[T any](body map[string]any, key string, list []T) {
	if len(list) > 0 {
		body[key] = list
	}
}

// longs writes ids the spec types as Long: as JSON numbers when they are
// integers, as strings otherwise.
func longs(ids []string) []any {
	if len(ids) == 0 {
		return nil
	}
	out := make([]any, len(ids))
	for i, id := range ids {
		id = strings.TrimSpace(id)
		if isLong(id) {
			out[i] = json.Number(id)
		} else {
			out[i] = id
		}
	}
	return out
}

// isLong reports whether s is written as a Java long would be: decimal,
// in range, no sign but a minus, no leading zero; others stay strings so that
// the id is sent exactly as known.
func isLong(s string) bool {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (digits[0] == '0' && len(digits) > 1) || digits[0] == '+' {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}
