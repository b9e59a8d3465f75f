package pagerduty_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/pagerduty"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// TestDefaultURLIsTheEventsAPIv2Endpoint: without url a sink posts to the
// endpoint PagerDuty documents for the Events API v2. Its page "Send an Alert
// Event" gives, under "Endpoint":
//
//	https://events.pagerduty.com/v2/enqueue
func TestDefaultURLIsTheEventsAPIv2Endpoint(t *testing.T) {
	const documented = "https://events.pagerduty.com/v2/enqueue"
	if pagerduty.DefaultURL != documented {
		t.Errorf("DefaultURL = %q, want %q", pagerduty.DefaultURL, documented)
	}
	rec, client := sinktest.NewRecorder(`{"status":"success","message":"Event processed","dedup_key":"a1"}`)
	clk := clock.NewFake(sinktest.Epoch)
	s := sinktest.Build(t, pagerduty.Type, "oncall", "routing_key_env: PD_KEY\n",
		map[string]string{"PD_KEY": "R0UT1NGKEY0123456789abcdefABCDEF"}, sinktype.Deps{Clock: clk, HTTP: client})
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.First(t); got != documented {
		t.Fatalf("the trigger went to %s, want %s", got, documented)
	}
}

// TestTheRESTAPIConstantsAreTheDocumentedOnes: what the sink sends to read
// acknowledgements back, as PagerDuty's OpenAPI document of the REST API
// (github.com/PagerDuty/api-schema, reference/REST/openapiv3.json) gives
// it:
//
//	"servers": [{"url": "https://api.pagerduty.com", "description": "PagerDuty V2 API."}]
//	"api_key": {"type": "apiKey", "name": "Authorization", "in": "header",
//	            "description": "The API Key with format `Token token=<API_KEY>`"}
//	Accept: "The `Accept` header is used as a versioning header."
//	        default "application/vnd.pagerduty+json;version=2"
func TestTheRESTAPIConstantsAreTheDocumentedOnes(t *testing.T) {
	if pagerduty.DefaultAPIURL != "https://api.pagerduty.com" {
		t.Errorf("DefaultAPIURL = %q", pagerduty.DefaultAPIURL)
	}
	if pagerduty.APIAccept != "application/vnd.pagerduty+json;version=2" {
		t.Errorf("APIAccept = %q", pagerduty.APIAccept)
	}
}
