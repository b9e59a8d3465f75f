package event

import "time"

// Samples are the events templates are tried on at check and at load:
// a start and an end of one alarm with every field set, as real events have
// them (spaces and dots in names, a recovery time, the raw upstream record),
// so that a template that fails on real events fails here.
func Samples() []Event {
	occurred := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	recovered := occurred.Add(17 * time.Minute)
	a := Alarm{
		OriginID:           "1862223400000000001",
		Status:             StatusOngoing,
		Level:              1,
		EventCode:          "E.PCS.1023",
		EventDesc:          "PCS over-temperature 过温 (module 2)",
		EventType:          "fault",
		TenantID:           "1001",
		TenantName:         "North Storage Ltd.",
		StationID:          "5001",
		StationName:        "North Battery Park 1.2",
		SystemID:           "7001",
		DeviceID:           "90001",
		DeviceSN:           "SN.PCS 0001",
		DeviceName:         "Battery rack 3 / PCS",
		DeviceTemplateCode: "Store_PCS",
		OccurredAt:         occurred,
		Raw: []byte(`{"id": "1862223400000000001", "status": 1, "eventLevel": 1, "eventCode": "E.PCS.1023", ` +
			`"eventDesc": "PCS over-temperature 过温 (module 2)", "stationName": "North Battery Park 1.2", ` +
			`"deviceSn": "SN.PCS 0001", "occurTime": "2026-11-21 08:00:00", "recoverTime": "2026-11-21 08:17:00"}`),
	}
	start := New(a, Start, occurred.Add(4*time.Second), false)
	// The command alarm management offers on a start people can
	// acknowledge.
	start.Data.AckCommand = "relay ack " + a.OriginID + " --by <you>"
	// As an escalation step announces it.
	start.Data.Escalation = &Escalation{Route: "urgent", AfterMs: 600000, WaitedMs: 603000}
	a.Status, a.RecoveredAt = StatusEnded, recovered
	end := New(a, End, recovered.Add(5*time.Second), true)
	end.Data.Inferred = true
	// A note of alarm management, as a chattering announcement carries.
	end.Data.Note = "Chattering, 3 starts in 4 min"
	return []Event{start, end}
}

// SampleAck is the ack event of the alarm of Samples: acknowledged from
// Slack, with a comment.
func SampleAck() Event {
	start := Samples()[0]
	occurred := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	a := Alarm{
		OriginID: start.Data.OriginID, Status: StatusOngoing, Level: start.Data.Level, EventCode: start.Data.EventCode,
		EventDesc: start.Data.EventDesc, EventType: start.Data.EventType, TenantID: start.Data.TenantID,
		StationID: start.Data.StationID, StationName: start.Data.StationName, SystemID: start.Data.SystemID,
		DeviceSN: start.Data.DeviceSN, DeviceName: start.Data.DeviceName, DeviceTemplateCode: start.Data.DeviceTemplateCode,
		OccurredAt: occurred, Raw: start.Data.Alarm,
	}
	return NewAck(a, Ack, 1, AckInfo{By: "U024BE7LH", Name: "li.wei", Via: "slack", At: FormatTime(occurred.Add(3 * time.Minute)),
		Comment: "on my way to rack 3"}, occurred.Add(4*time.Second))
}
