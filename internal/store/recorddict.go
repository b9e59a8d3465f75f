package store

// recordDict1 is the dictionary of frame format frameS2Dict1: a
// representative upstream alarm record, so that even a record's first
// field names and common values compress. Frames written with it are read
// with it: it must never change; a better dictionary is a new frame format.
const recordDict1 = `{"originId":"1861234567890123456","kafkaUuid":"5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f",` +
	`"tenantId":"1830000000000000001","tenantName":"Example Energy Co., Ltd.","deviceId":"1900000000000000001",` +
	`"deviceSn":"SN0000000001","deviceName":"PCS-1","deviceTemplateType":"ESS","deviceTemplateCode":"PCS",` +
	`"systemId":"1800000000000000001","systemCode":"SYS-1","systemName":"System 1",` +
	`"stationId":"1700000000000000001","stationCode":"ST-1","stationName":"Station 1",` +
	`"occurrenceTime":"1795680000000","occurrenceTimeStr":"2026-11-21 08:00:00",` +
	`"recoveryTime":null,"recoveryTimeStr":null,"durationTp":null,"status":1,` +
	`"eventCode":"PCS_001","eventDesc":"DC insulation resistance abnormal","eventType":"fault","eventLevel":2,` +
	`"eventCategoryCode":"ESS_PCS","eventCategoryDescription":"Power conversion system events",` +
	`"eventCategoryInfluence":"Output limited","eventTagNameStr":"insulation","eventTagCodeStr":"INS",` +
	`"payload":"{\"value\":\"12.5\",\"threshold\":\"50\"}","note":""}` +
	`{"originId":"1861234567890123457","status":0,"eventLevel":1,"eventType":"alarm","eventCode":"BMS_",` +
	`"recoveryTime":"1795680600000","recoveryTimeStr":"2026-11-21 08:10:00","durationTp":"600000",` +
	`"deviceTemplateType":"BMS","deviceTemplateCode":"BMS","eventDesc":"Cell over-temperature",` +
	`"eventCategoryCode":"ESS_BMS","eventCategoryDescription":"Battery management system events",` +
	`"eventCategoryInfluence":"None","eventLevel":0,"eventLevel":3,"grid over-voltage","communication lost"`
