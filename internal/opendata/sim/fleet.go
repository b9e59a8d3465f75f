package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// Tenant is the simulated tenant, as tests need to know it.
type Tenant struct {
	ID   string
	Name string
}

// Station is a generated station, as tests need to know it.
type Station struct {
	ID     string
	SN     string
	Name   string
	NodeID string
	Shared bool
}

// System is a generated system, as tests need to know it.
type System struct {
	ID           string
	Code         string
	Name         string
	NodeID       string
	StationID    string
	TemplateCode string
	Shared       bool
}

// Device is a generated device, as tests need to know it. NodeID is empty for
// devices without point data (data collectors), as the spec allows.
type Device struct {
	ID           string
	SN           string
	Name         string
	NodeID       string
	TemplateCode string
	TemplateType string
	StationID    string
	SystemID     string
	Shared       bool
}

// Fleet is the generated asset tree of a Server, in generation order.
type Fleet struct {
	Tenant   Tenant
	Stations []Station
	Systems  []System
	Devices  []Device
}

// attribute is an attribute item of a station or device.
type attribute struct {
	Code      string `json:"attributeCode"`
	Name      string `json:"attributeName"`
	Value     string `json:"attributeValue"`
	ValueName string `json:"attributeValueName,omitempty"`
}

// extraInfo is an item of a station's extraInfoList.
type extraInfo struct {
	Key   string `json:"extraKey"`
	Value string `json:"extraValue"`
}

type tenant struct {
	id, name, customerCode, creatorID string
	created, updated                  time.Time
}

type station struct {
	idx                            int
	id, name, sn, nodeID           string
	tenantID, templateCode         string
	templateType, templateCategory string
	shared                         bool
	attrs                          []attribute
	extra                          []extraInfo
}

type system struct {
	idx                        int
	id, name, code, nodeID     string
	tenantID                   string
	templateCode, templateType string
	shared                     bool
	station                    *station
}

type device struct {
	idx                        int
	id, name, sn, code, nodeID string
	tenantID                   string
	tmpl                       *template
	baseState                  string
	firmware                   string
	shared                     bool
	station                    *station
	system                     *system
	attrs                      []attribute
}

// template is a device type: the spec's templateCode with what the simulator
// derives from it.
type template struct {
	code, typ, prefix, label string
	rated                    float64 // kW, for power-like metrics
	points                   bool    // has a nodeId and point data
}

var templates = map[string]*template{
	"Inverter":            {"Inverter", "PV", "INV", "Inverter", 110, true},
	"ElectricMeter":       {"ElectricMeter", "Meter", "EM", "Meter", 400, true},
	"DataCollector":       {"DataCollector", "Communication", "DC", "Data Collector", 0, false},
	"EnvironmentalTester": {"EnvironmentalTester", "Environment", "ENV", "Weather Station", 1, true},
	"TemperatureSensor":   {"TemperatureSensor", "Environment", "TS", "Temperature Sensor", 1, true},
	"BMS":                 {"BMS", "Storage", "BMS", "Battery System", 500, true},
	"Store_PCS":           {"Store_PCS", "Storage", "PCS", "Storage PCS", 250, true},
	"Store_BMS":           {"Store_BMS", "Storage", "BC", "Battery Cluster", 250, true},
	"Store_Pack":          {"Store_Pack", "Storage", "BP", "Battery Pack", 50, true},
	"Battery_Stack":       {"Battery_Stack", "Storage", "BS", "Battery Stack", 500, true},
	"EleStoringEquipment": {"EleStoringEquipment", "Storage", "ESS", "Storage Cabinet", 215, true},
	"LiquidCooler":        {"LiquidCooler", "Auxiliary", "LC", "Liquid Cooler", 15, true},
	"AntiFire":            {"AntiFire", "Auxiliary", "AF", "Fire Protection", 1, true},
}

// The device types of a PV system and of a storage system, in the order they
// are handed out.
var (
	pvCycle      = []string{"Inverter", "Inverter", "ElectricMeter", "DataCollector", "EnvironmentalTester", "TemperatureSensor"}
	storageCycle = []string{"Store_PCS", "Store_BMS", "ElectricMeter", "BMS", "Store_Pack", "Battery_Stack", "EleStoringEquipment", "LiquidCooler", "AntiFire"}
)

var stationNames = []string{
	"Sunridge", "Harbor Point", "Eastfield", "Copper Hill", "Lakeside", "Windmere",
	"Stonebridge", "Maple Flats", "Red Mesa", "Northgate", "Silver Creek", "Oak Valley",
}

type place struct {
	province, city, cityCode, district, township, adCode string
	lat, lon                                             float64
}

var places = []place{
	{"Jiangsu", "Suzhou", "0512", "Wujiang", "Songling", "320509", 31.16, 120.64},
	{"Zhejiang", "Hangzhou", "0571", "Xiaoshan", "Beigan", "330109", 30.18, 120.26},
	{"Guangdong", "Foshan", "0757", "Shunde", "Daliang", "440606", 22.84, 113.25},
	{"Shandong", "Qingdao", "0532", "Huangdao", "Xuejiadao", "370211", 35.96, 120.19},
}

// Device state codes and their names.
var deviceStates = map[string]string{
	"1000": "running", "1001": "standby", "1002": "fault", "1003": "shutdown",
	"1004": "sleeping", "1005": "offline", "1011": "abnormal",
}

// fleet is the immutable asset tree and its lookups.
type fleet struct {
	tenant   tenant
	owner    tenant // the other tenant, which shares some of its assets with ours
	stations []*station
	systems  []*system
	devices  []*device

	stationByID  map[string]*station
	systemByID   map[string]*system
	deviceBySN   map[string]*device
	deviceByNode map[string]*device
}

// idGen hands out unique decimal ids of a fixed width.
type idGen struct {
	rng  *rand.Rand
	seen map[string]bool
}

func (g *idGen) next(digits int) string {
	lo := int64(1)
	for range digits - 1 {
		lo *= 10
	}
	for {
		s := strconv.FormatInt(lo+g.rng.Int64N(9*lo), 10)
		if !g.seen[s] {
			g.seen[s] = true
			return s
		}
	}
}

// fleetEpoch anchors generated dates, so that a fleet depends on its seed only.
var fleetEpoch = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// newFleet generates the asset tree for o, which has its defaults applied.
func newFleet(o Options) *fleet {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x72656c6179))
	ids := &idGen{rng: rng, seen: map[string]bool{}}
	f := &fleet{
		stationByID:  map[string]*station{},
		systemByID:   map[string]*system{},
		deviceBySN:   map[string]*device{},
		deviceByNode: map[string]*device{},
	}
	newTenant := func(name string) tenant {
		created := fleetEpoch.Add(time.Duration(rng.IntN(200*24)) * time.Hour)
		return tenant{
			id: ids.next(19), name: name,
			customerCode: fmt.Sprintf("C%07d", rng.IntN(10_000_000)),
			creatorID:    ids.next(19),
			created:      created,
			updated:      created.Add(time.Duration(rng.IntN(90*24)) * time.Hour),
		}
	}
	f.tenant = newTenant(fmt.Sprintf("Tenant %d", rng.IntN(900)+100))
	f.owner = newTenant(fmt.Sprintf("Partner %d", rng.IntN(900)+100))
	names := rng.Perm(len(stationNames))
	for si := range o.Stations {
		f.addStation(o, rng, ids, si, names[si%len(names)])
	}
	return f
}

func (f *fleet) addStation(o Options, rng *rand.Rand, ids *idGen, si, name int) {
	shared := si >= o.Stations-o.SharedStations
	tenantID := f.tenant.id
	if shared {
		tenantID = f.owner.id
	}
	label := stationNames[name]
	if si >= len(stationNames) {
		label = fmt.Sprintf("%s %d", label, si/len(stationNames)+1)
	}
	pl := places[rng.IntN(len(places))]
	lat := pl.lat + rng.Float64()*0.2 - 0.1
	lon := pl.lon + rng.Float64()*0.2 - 0.1
	st := &station{
		idx: si, id: ids.next(19), name: label + " Station",
		sn: fmt.Sprintf("ST%010d", rng.IntN(10_000_000_000)), nodeID: ids.next(16),
		tenantID: tenantID, shared: shared,
		templateCode: "PVStorageStation", templateType: "station", templateCategory: "energy",
	}
	ready := fleetEpoch.Add(time.Duration(rng.IntN(600*24)) * time.Hour)
	st.attrs = []attribute{
		{"IsQuality", "Quality station", "1", "yes"},
		{"IsReady", "Ready", "1", "yes"},
		{"ElectricitySalesType", "Electricity sales type", "2", "self-use, surplus to grid"},
		{"StatusOfConstruction", "Status of construction", "3", "in operation"},
		{"IsSigned", "Signed", "1", ""},
		{"StationElements", "Station elements", "PV,Storage", ""},
		{"ReadyTime", "Ready time", ready.Format("2006-01-02T15:04:05.000Z"), ""},
		{"Latitude", "Latitude", strconv.FormatFloat(lat, 'f', 6, 64), ""},
		{"Longitude", "Longitude", strconv.FormatFloat(lon, 'f', 6, 64), ""},
		{"AreaID", "Area", pl.adCode, pl.district},
		{"Altitude", "Altitude", strconv.Itoa(5 + rng.IntN(400)), ""},
	}
	geo, _ := json.Marshal(map[string]string{
		"formattedAddress": fmt.Sprintf("%d %s Road, %s, %s, %s", 1+rng.IntN(999), pl.township, pl.district, pl.city, pl.province),
		"adCode":           pl.adCode,
		"country":          "China",
		"province":         pl.province,
		"city":             pl.city,
		"cityCode":         pl.cityCode,
		"district":         pl.district,
		"township":         pl.township,
		"longitude":        strconv.FormatFloat(lon, 'f', 6, 64),
		"latitude":         strconv.FormatFloat(lat, 'f', 6, 64),
	})
	st.extra = []extraInfo{{"SpecialPriceTriggerStatus", strconv.Itoa(rng.IntN(2))}, {"geoInfo", string(geo)}}
	f.stations = append(f.stations, st)
	f.stationByID[st.id] = st

	for yi := range o.SystemsPerStation {
		cycle, kind, code := pvCycle, "PV", "PVSystem"
		if yi%2 == 1 {
			cycle, kind, code = storageCycle, "Storage", "StorageSystem"
		}
		sys := &system{
			idx: len(f.systems), id: ids.next(19), nodeID: ids.next(16),
			name: fmt.Sprintf("%s %s System %d", label, kind, yi+1),
			code: fmt.Sprintf("SYS%08d", rng.IntN(100_000_000)), tenantID: tenantID,
			templateCode: code, templateType: kind, shared: shared, station: st,
		}
		f.systems = append(f.systems, sys)
		f.systemByID[sys.id] = sys
		for di := range o.DevicesPerSystem {
			f.addDevice(rng, ids, sys, templates[cycle[di%len(cycle)]], di)
		}
	}
}

func (f *fleet) addDevice(rng *rand.Rand, ids *idGen, sys *system, tm *template, di int) {
	d := &device{
		idx: len(f.devices), id: ids.next(19), tmpl: tm,
		name:     fmt.Sprintf("%s %s %d", sys.name, tm.label, di+1),
		tenantID: sys.tenantID, shared: sys.shared, station: sys.station, system: sys,
		firmware: fmt.Sprintf("V%d.%d.%d", 1+rng.IntN(3), rng.IntN(10), rng.IntN(20)),
	}
	for {
		d.sn = fmt.Sprintf("%s%010d", tm.prefix, rng.IntN(10_000_000_000))
		if f.deviceBySN[d.sn] == nil {
			break
		}
	}
	d.code = "DEV-" + d.sn
	if tm.points {
		d.nodeID = ids.next(16)
		f.deviceByNode[d.nodeID] = d
	}
	switch r := rng.IntN(100); {
	case r < 6:
		d.baseState = "1001"
	case r < 9:
		d.baseState = "1005"
	case r < 11:
		d.baseState = "1003"
	default:
		d.baseState = "1000"
	}
	running := fleetEpoch.Add(time.Duration(rng.IntN(700*24)) * time.Hour)
	d.attrs = []attribute{
		{"RatedPower", "Rated power", strconv.FormatFloat(tm.rated, 'f', 1, 64), ""},
		{"RuningDate", "Running date", running.Format("2006-01-02T15:04:05.000Z"), ""},
		{"PackagDate", "Package date", running.Add(-30 * 24 * time.Hour).Format("2006-01-02T15:04:05.000Z"), ""},
		{"Type", "Type", tm.typ, tm.label},
		{"Group", "Group", strconv.Itoa(1 + di/4), ""},
		{"Coefficient", "Coefficient", "1", ""},
		{"IsFlip", "Flip", "0", "no"},
	}
	if tm.code == "DataCollector" {
		d.attrs = append(d.attrs,
			attribute{"SIMCardNumber", "SIM card number", fmt.Sprintf("8986%016d", rng.Int64N(10_000_000_000_000_000)), ""},
			attribute{"SIMCardSuffix", "SIM card suffix", fmt.Sprintf("%04d", rng.IntN(10_000)), ""},
			attribute{"MqttAuth", "MQTT auth", "1", "enabled"},
		)
	}
	f.devices = append(f.devices, d)
	f.deviceBySN[d.sn] = d
}

// selectDevices marks, by device index, the devices that pass the filters of
// an alarm query: station ids, system ids, serial numbers and device types,
// each nil for no filtering. It returns nil when nothing filters.
func (f *fleet) selectDevices(filters [4]map[string]bool) []bool {
	if filters[0] == nil && filters[1] == nil && filters[2] == nil && filters[3] == nil {
		return nil
	}
	in := func(m map[string]bool, v string) bool { return m == nil || m[v] }
	out := make([]bool, len(f.devices))
	for i, d := range f.devices {
		out[i] = in(filters[0], d.station.id) && in(filters[1], d.system.id) &&
			in(filters[2], d.sn) && in(filters[3], d.tmpl.code)
	}
	return out
}

// public returns the fleet as tests see it.
func (f *fleet) public() Fleet {
	out := Fleet{Tenant: Tenant{ID: f.tenant.id, Name: f.tenant.name}}
	for _, st := range f.stations {
		out.Stations = append(out.Stations, Station{ID: st.id, SN: st.sn, Name: st.name, NodeID: st.nodeID, Shared: st.shared})
	}
	for _, sy := range f.systems {
		out.Systems = append(out.Systems, System{
			ID: sy.id, Code: sy.code, Name: sy.name, NodeID: sy.nodeID, StationID: sy.station.id,
			TemplateCode: sy.templateCode, Shared: sy.shared,
		})
	}
	for _, d := range f.devices {
		out.Devices = append(out.Devices, Device{
			ID: d.id, SN: d.sn, Name: d.name, NodeID: d.nodeID, TemplateCode: d.tmpl.code,
			TemplateType: d.tmpl.typ, StationID: d.station.id, SystemID: d.system.id, Shared: d.shared,
		})
	}
	return out
}
