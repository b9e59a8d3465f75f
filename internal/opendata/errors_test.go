package opendata_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/opendata"
)

// An upstream answer whose code and messages hold terminal controls gives an
// error line that prints them escaped: relay api and relay check print it,
// and the text log writes it as it is.
func TestErrorEscapesTheUpstreamsText(t *testing.T) {
	err := &opendata.Error{
		Endpoint: "getAlarmList", Kind: opendata.KindBadRequest, HTTPStatus: 400,
		Code: "A04\x1b[2J10", Description: "设备列表过长\r\u202e", ErrorMsg: "limit\b 50",
	}
	want := `opendata: getAlarmList: HTTP 400 code A04\x1b[2J10 "设备列表过长\r\u202e" (limit\b 50) (bad_request)`
	if got := err.Error(); got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}
