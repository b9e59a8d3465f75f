package event

import "strings"

// DeviceTypes are the device types (templateCode, and an alarm's
// deviceTemplateCode) of the Open Data Service, as its spec lists them.
var DeviceTypes = []string{
	"Inverter", "ElectricMeter", "DataCollector", "EnvironmentalTester", "TemperatureSensor", "BMS",
	"Store_PCS", "Store_BMS", "Store_Pack", "Battery_Stack", "EleStoringEquipment", "LiquidCooler", "AntiFire",
}

// DeviceType returns the spec's spelling of the device type s, whatever its
// letter case, and whether s is one of DeviceTypes.
func DeviceType(s string) (string, bool) {
	for _, t := range DeviceTypes {
		if t == s || strings.EqualFold(t, s) {
			return t, true
		}
	}
	return s, false
}
