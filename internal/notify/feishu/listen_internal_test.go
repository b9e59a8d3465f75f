package feishu

import (
	"testing"
	"time"
)

// TestLongConnectionConstantsAreTheSDKs checks the long connection's
// constants against those of Feishu's Go SDK (larksuite/oapi-sdk-go/v3),
// quoted from its ws/const.go:
//
//	GenEndpointUri = "/callback/ws/endpoint"
//	HeaderType = "type"; HeaderMessageID = "message_id"; HeaderSum = "sum"
//	HeaderSeq = "seq"; HeaderTraceID = "trace_id"; HeaderBizRt = "biz_rt"
//	MessageTypeEvent = "event"; MessageTypeCard = "card"
//	MessageTypePing = "ping"; MessageTypePong = "pong"
//	FrameTypeControl FrameType = 0; FrameTypeData FrameType = 1
//	OK = 0; SystemBusy = 1; Forbidden = 403; AuthFailed = 514
//	ExceedConnLimit = 1000040350; InternalError = 1000040343
//
// and from NewClient in its ws/client.go, the settings until Feishu sends
// its own: reconnectInterval: 2 * time.Minute, pingInterval: 2 * time.Minute.
func TestLongConnectionConstantsAreTheSDKs(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"GenEndpointUri", EndpointPath, "/callback/ws/endpoint"},
		{"HeaderType", hType, "type"}, {"HeaderMessageID", hMessageID, "message_id"}, {"HeaderSum", hSum, "sum"},
		{"HeaderSeq", hSeq, "seq"}, {"HeaderTraceID", hTraceID, "trace_id"}, {"HeaderBizRt", hBizRt, "biz_rt"},
		{"MessageTypeEvent", typeEvent, "event"}, {"MessageTypeCard", typeCard, "card"},
		{"MessageTypePing", typePing, "ping"}, {"MessageTypePong", typePong, "pong"},
		{"FrameTypeControl", methodControl, 0}, {"FrameTypeData", methodData, 1},
		{"OK", codeOK, 0}, {"SystemBusy", endpointBusy, 1}, {"Forbidden", handshakeForbidden, 403},
		{"AuthFailed", handshakeAuthFailed, 514}, {"ExceedConnLimit", handshakeConnLimit, 1000040350},
		{"InternalError", endpointInternal, 1000040343},
		{"reconnectInterval", defaultReconnect, 2 * time.Minute}, {"pingInterval", defaultPing, 2 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("the SDK's %s is %v, ours %v", c.name, c.want, c.got)
		}
	}
}
