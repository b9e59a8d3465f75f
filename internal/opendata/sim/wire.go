package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Result codes the simulator answers with; see the package documentation for
// which request causes which.
const (
	CodeSuccess      = "00000"
	CodeThirdParty   = "C0001"
	CodeTokenExpired = "A0230"
	CodeTokenInvalid = "A0301"
	CodeBadParameter = "A0400"
	CodeOutOfRange   = "A0410"
	CodeRangeTooLong = "A0420"
	CodeRateLimited  = "A0501"
)

// Descriptions and formats of the wire.
const (
	descSuccess       = "success"
	descThirdParty    = "error calling a third-party service"
	descAuthFailed    = "authentication failed"
	descRateLimited   = "too many requests"
	descTokenExpired  = "access token has expired"
	descTokenInvalid  = "access token is missing or invalid"
	upstreamTimestamp = "2006-01-02 15:04:05"
)

// Endpoint names, as used by InjectFault and Stats: the last segment of each
// endpoint's path.
const (
	EndpointLogin          = "login"
	EndpointStationList    = "getTenantStationList"
	EndpointSystemList     = "getTenantSystemList"
	EndpointDeviceList     = "getTenantDeviceList"
	EndpointStationDevices = "getStationDeviceList"
	EndpointStationDetail  = "getStationDetail"
	EndpointAlarmList      = "getAlarmList"
	EndpointRealTime       = "getDeviceRealTimeData"
	EndpointSystemHistory  = "getSystemPointsDayMonthYearDataList"
	EndpointStationHistory = "getStationPointsDayMonthYearDataList"
	EndpointDeviceHistory  = "getDevicePointsDayMonthYearDataList"
	// AnyEndpoint makes InjectFault apply a fault to whichever endpoint is
	// called next.
	AnyEndpoint = "*"
	// unknownEndpoint is the Stats key of requests to a path that is not an
	// endpoint.
	unknownEndpoint = "unknown"
)

// Shape selects how values that the spec types inconsistently (ids as String
// or Long, epoch-millisecond times as String or number) are written.
type Shape int

const (
	// ShapeMixed writes each record one way or the other, chosen from a hash
	// of the record's id, so a client sees both shapes in one answer and the
	// same record always looks the same.
	ShapeMixed Shape = iota
	// ShapeString writes every such value as a JSON string.
	ShapeString
	// ShapeNumber writes every such value as a JSON number.
	ShapeNumber
)

// numeric reports whether a value of the record keyed by key is written as a
// number; bit selects an independent choice per kind of value.
func (sh Shape) numeric(key string, bit uint) bool {
	switch sh {
	case ShapeString:
		return false
	case ShapeNumber:
		return true
	default:
		return hash64(key)>>bit&1 == 1
	}
}

// Bits of a record's hash that choose its shapes under ShapeMixed.
const (
	bitIDs   = 0
	bitTimes = 1
)

// idValue renders a decimal id as a JSON string or number.
func idValue(id string, numeric bool) any {
	if numeric && id != "" {
		return json.Number(id)
	}
	return id
}

// msValue renders epoch milliseconds as a JSON string or number.
func msValue(ms int64, numeric bool) any {
	if numeric {
		return json.Number(strconv.FormatInt(ms, 10))
	}
	return strconv.FormatInt(ms, 10)
}

// formatUpstream writes t as the upstream's yyyy-MM-dd HH:mm:ss, in UTC.
func formatUpstream(t time.Time) string { return t.UTC().Format(upstreamTimestamp) }

// hash64 is the FNV-1a hash of parts joined by a separator; every generated
// value that must be stable for a seed derives from it.
func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return h.Sum64()
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// envelope is the common response body.
type envelope struct {
	Code        string `json:"code"`
	Description string `json:"description"`
	Data        any    `json:"data,omitempty"`
	ErrorMsg    string `json:"errorMsg,omitempty"`
	ErrorKey    string `json:"errorKey,omitempty"`
}

// apiError is a failure answered in the envelope.
type apiError struct {
	code string
	desc string
}

func (e *apiError) Error() string { return e.code + ": " + e.desc }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{code: code, desc: fmt.Sprintf(format, args...)}
}

// params is a request body: a JSON object decoded field by field, so that each
// field can be coerced the way a Java service coerces it.
type params map[string]json.RawMessage

func parseParams(body []byte) (params, *apiError) {
	var p params
	if err := json.Unmarshal(body, &p); err != nil || p == nil {
		return nil, errorf(CodeBadParameter, "request body must be a JSON object")
	}
	return p, nil
}

// raw returns the field's value and whether it is present and not null.
func (p params) raw(name string) (json.RawMessage, bool) {
	v, ok := p[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// int64 reads an integer written as a number or a numeric string.
func (p params) int64(name string) (int64, bool, *apiError) {
	v, ok := p.raw(name)
	if !ok {
		return 0, false, nil
	}
	n, err := scalarInt(v)
	if err != nil {
		return 0, true, errorf(CodeBadParameter, "parameter %s must be an integer", name)
	}
	return n, true, nil
}

// str reads a string, accepting a number as its decimal text.
func (p params) str(name string) (string, bool, *apiError) {
	v, ok := p.raw(name)
	if !ok {
		return "", false, nil
	}
	s, err := scalarString(v)
	if err != nil {
		return "", true, errorf(CodeBadParameter, "parameter %s must be a string", name)
	}
	return s, true, nil
}

// boolean reads true/false, also written as strings.
func (p params) boolean(name string) (bool, bool, *apiError) {
	v, ok := p.raw(name)
	if !ok {
		return false, false, nil
	}
	switch strings.Trim(string(v), `"`) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, errorf(CodeBadParameter, "parameter %s must be a boolean", name)
}

// list reads a JSON array.
func (p params) list(name string) ([]json.RawMessage, bool, *apiError) {
	v, ok := p.raw(name)
	if !ok {
		return nil, false, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, true, errorf(CodeBadParameter, "parameter %s must be a list", name)
	}
	return items, true, nil
}

// longs reads a list of Long ids, each a number or numeric string, returned in
// canonical decimal form.
func (p params) longs(name string) ([]string, bool, *apiError) {
	items, ok, aerr := p.list(name)
	if !ok || aerr != nil {
		return nil, ok, aerr
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		n, err := scalarInt(it)
		if err != nil {
			return nil, true, errorf(CodeBadParameter, "parameter %s must be a list of integers", name)
		}
		out = append(out, strconv.FormatInt(n, 10))
	}
	return out, true, nil
}

// strs reads a list of strings, accepting numbers as their decimal text.
func (p params) strs(name string) ([]string, bool, *apiError) {
	items, ok, aerr := p.list(name)
	if !ok || aerr != nil {
		return nil, ok, aerr
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, err := scalarString(it)
		if err != nil {
			return nil, true, errorf(CodeBadParameter, "parameter %s must be a list of strings", name)
		}
		out = append(out, s)
	}
	return out, true, nil
}

// ints reads a list of integers.
func (p params) ints(name string) ([]int64, bool, *apiError) {
	items, ok, aerr := p.list(name)
	if !ok || aerr != nil {
		return nil, ok, aerr
	}
	out := make([]int64, 0, len(items))
	for _, it := range items {
		n, err := scalarInt(it)
		if err != nil {
			return nil, true, errorf(CodeBadParameter, "parameter %s must be a list of integers", name)
		}
		out = append(out, n)
	}
	return out, true, nil
}

// flag reads a 0/1 switch such as isGetFirmwareVersion, written as a number or
// a string; absent means 0.
func (p params) flag(name string) (bool, *apiError) {
	n, ok, aerr := p.int64(name)
	if aerr != nil || !ok {
		return false, aerr
	}
	if n != 0 && n != 1 {
		return false, errorf(CodeOutOfRange, "parameter %s must be 0 or 1, got %d", name, n)
	}
	return n == 1, nil
}

// assetScope reads assetScope: 0 all, 1 owned (the default), 2 shared.
func (p params) assetScope() (int64, *apiError) {
	n, ok, aerr := p.int64("assetScope")
	if aerr != nil {
		return 0, aerr
	}
	if !ok {
		return 1, nil
	}
	if n < 0 || n > 2 {
		return 0, errorf(CodeOutOfRange, "parameter assetScope must be 0, 1 or 2, got %d", n)
	}
	return n, nil
}

// inScope reports whether an asset with the given sharing belongs to scope.
func inScope(scope int64, shared bool) bool {
	switch scope {
	case 1:
		return !shared
	case 2:
		return shared
	default:
		return true
	}
}

func scalarInt(v json.RawMessage) (int64, error) {
	s := string(v)
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, err
		}
		s = strings.TrimSpace(s)
	}
	return strconv.ParseInt(s, 10, 64)
}

func scalarString(v json.RawMessage) (string, error) {
	if strings.HasPrefix(string(v), `"`) {
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return "", err
	}
	return n.String(), nil
}

// set turns a list into a membership set; nil when the list is empty, which
// means no filtering.
func set(items []string) map[string]bool {
	if len(items) == 0 {
		return nil
	}
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}
