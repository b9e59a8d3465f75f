package sim

import "math/rand/v2"

// eventDef is an entry of the simulated event library: what an alarm's event
// fields say about it.
type eventDef struct {
	code, desc, typ                   string
	category, categoryDesc, influence string
	tagNames, tagCodes, point         string
	threshold                         float64
}

// commonEvent can be raised by every device.
var commonEvent = eventDef{
	"COM_0001", "Device communication lost", "communication",
	"COMMON_LIB", "Common event library", "device", "Communication", "communication", "state", 1,
}

// eventsByType is the event library per first-level device type.
var eventsByType = map[string][]eventDef{
	"PV": {
		{"INV_1001", "Grid overvoltage", "fault", "INV_LIB", "Inverter event library", "system", "Grid,Voltage", "grid,voltage", "ua", 253},
		{"INV_1002", "Grid undervoltage", "fault", "INV_LIB", "Inverter event library", "system", "Grid,Voltage", "grid,voltage", "ua", 187},
		{"INV_1010", "Insulation resistance low", "fault", "INV_LIB", "Inverter event library", "device", "Safety,Insulation", "safety,insulation", "r", 0.5},
		{"INV_1020", "Inverter over temperature", "alarm", "INV_LIB", "Inverter event library", "device", "Temperature", "temperature", "t", 75},
		{"INV_2001", "String current abnormal", "warning", "INV_LIB", "Inverter event library", "device", "String,Current", "string,current", "i1", 0.2},
	},
	"Meter": {
		{"EM_3001", "Phase loss", "fault", "METER_LIB", "Meter event library", "station", "Grid,Phase", "grid,phase", "ub", 10},
		{"EM_3002", "Reverse power flow", "alarm", "METER_LIB", "Meter event library", "station", "Grid,Power", "grid,power", "p", 0},
	},
	"Communication": {
		{"DC_4001", "Data collector offline", "communication", "DC_LIB", "Collector event library", "system", "Communication", "communication", "state", 1},
	},
	"Environment": {
		{"ENV_5001", "Sensor reading out of range", "warning", "ENV_LIB", "Environment event library", "device", "Sensor", "sensor", "t", 85},
	},
	"Storage": {
		{"BMS_6001", "Cell overvoltage", "fault", "ESS_LIB", "Storage event library", "system", "Battery,Voltage", "battery,voltage", "u", 3.65},
		{"BMS_6002", "Cell over temperature", "fault", "ESS_LIB", "Storage event library", "system", "Battery,Temperature", "battery,temperature", "t", 55},
		{"BMS_6003", "State of charge low", "warning", "ESS_LIB", "Storage event library", "device", "Battery,SOC", "battery,soc", "soc", 5},
		{"PCS_6101", "DC bus overvoltage", "fault", "ESS_LIB", "Storage event library", "system", "PCS,Voltage", "pcs,voltage", "u", 850},
	},
	"Auxiliary": {
		{"AUX_7001", "Coolant flow low", "alarm", "AUX_LIB", "Auxiliary event library", "device", "Cooling", "cooling", "f", 2},
		{"AF_7101", "Smoke detected", "fault", "AUX_LIB", "Auxiliary event library", "station", "Fire,Smoke", "fire,smoke", "gate", 1},
	},
}

// eventFor returns the library entry for code as raised by d: the device
// type's entry, the common one, or a plain made-up entry for a code the
// library does not know.
func eventFor(d *device, code string) *eventDef {
	for i, ev := range eventsByType[d.tmpl.typ] {
		if ev.code == code {
			return &eventsByType[d.tmpl.typ][i]
		}
	}
	if code == commonEvent.code {
		return &commonEvent
	}
	return &eventDef{
		code: code, desc: "Simulated event " + code, typ: "alarm",
		category: "SIM_LIB", categoryDesc: "Simulator event library", influence: "device",
		tagNames: "Simulated", tagCodes: "simulated", point: "state", threshold: 1,
	}
}

// randomEvent picks an event d can raise.
func randomEvent(d *device, rng *rand.Rand) *eventDef {
	lib := eventsByType[d.tmpl.typ]
	if i := rng.IntN(len(lib) + 1); i < len(lib) {
		return &lib[i]
	}
	return &commonEvent
}
