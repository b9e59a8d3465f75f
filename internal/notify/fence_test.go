package notify_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// The fenced transport of the HTTP sinks lets requests through while the
// fence allows and refuses them afterwards before they reach the server.
func TestFencedTransportRefusesRequestsOnceTheFenceRefuses(t *testing.T) {
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { arrived.Add(1) }))
	t.Cleanup(srv.Close)
	fence := &notifytest.SwitchFence{}
	c := &http.Client{Transport: notify.FencedTransport(fence.Check, nil)}
	post := func() error {
		resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post(); err != nil {
		t.Fatalf("request while the fence allows: %v", err)
	}
	fence.Closed.Store(true)
	if err := post(); !errors.Is(err, notifytest.ErrLeaseGone) {
		t.Fatalf("request after the fence refused: error %v, want the fence's", err)
	}
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server, want the one made before the fence refused", n)
	}
	if tr := notify.FencedTransport(nil, nil); tr != nil {
		t.Errorf("without a fence the transport is %T, want nil (the client's default)", tr)
	}
}
