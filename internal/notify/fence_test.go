package notify_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"sync"
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

// A fence that refuses just after the transport asked it, as when a replica
// is paused between its check and the wire and resumes past its lease,
// still keeps the request from the server: the connection asks it again
// before it is dialled and before each write. The caller is told the
// fence's reason, not only that its connection closed.
func TestARequestWhoseFenceClosesAfterItsCheckReachesNobody(t *testing.T) {
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { arrived.Add(1) }))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name    string
		allowed int32 // questions answered yes before the lease is gone
	}{
		{"at the dial", 1},        // the transport's check
		{"at the first write", 2}, // the transport's and the dial's
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 {
				var asked atomic.Int32
				fence := func() error {
					if asked.Add(1) <= tc.allowed {
						return nil
					}
					return notifytest.ErrLeaseGone
				}
				c := &http.Client{Transport: notify.FencedTransport(fence, nil)}
				resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
				if err == nil {
					resp.Body.Close()
				}
				c.CloseIdleConnections()
				if !errors.Is(err, notifytest.ErrLeaseGone) {
					t.Fatalf("a request whose fence closed after %d questions: error %v, want the fence's", tc.allowed, err)
				}
			}
			if n := arrived.Load(); n != 0 {
				t.Fatalf("%d requests reached the server after the fence refused", n)
			}
		})
	}
}

// Over TLS the fenced transport still speaks HTTP/2 where the server does
// (as Slack's API and most vendors' do), and a request refused at the
// socket of an HTTP/2 connection reaches nobody.
func TestAFencedTransportSpeaksHTTP2AndRefusesOnItsConnection(t *testing.T) {
	var arrived atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// After the first request, the transport's check is allowed and the
	// connection's next question is not.
	var armed atomic.Bool
	var asked atomic.Int32
	fence := func() error {
		if !armed.Load() || asked.Add(1) == 1 {
			return nil
		}
		return notifytest.ErrLeaseGone
	}
	c := &http.Client{Transport: notify.FencedTransport(fence, srv.Client().Transport)}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Fatalf("answered in %s, TLS %v: want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	armed.Store(true)
	resp, err = c.Post(srv.URL, "application/json", strings.NewReader("{}"))
	refusedAfterOne(t, "a request refused on an HTTP/2 connection", resp, err, &arrived)
}

// refusedAfterOne checks that the request that got resp and err was refused
// by the fence, and that one request, the one before, reached the server.
func refusedAfterOne(t *testing.T, what string, resp *http.Response, err error, arrived *atomic.Int32) {
	t.Helper()
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, notifytest.ErrLeaseGone) {
		t.Errorf("%s: error %v, want the fence's", what, err)
	}
	if n := arrived.Load(); n != 1 {
		t.Errorf("%d requests arrived, want the one before the fence refused", n)
	}
}

// A transport that makes its TLS connections itself (DialTLSContext) is
// fenced before each request only: it keeps working, HTTP/2 and all, and a
// request after the fence refused reaches nobody.
func TestAFencedTransportThatDialsItsOwnTLSStillWorks(t *testing.T) {
	var arrived atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { arrived.Add(1) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	next := &http.Transport{ForceAttemptHTTP2: true, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&tls.Dialer{Config: cfg}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(next.CloseIdleConnections)
	fence := &notifytest.SwitchFence{}
	c := &http.Client{Transport: notify.FencedTransport(fence.Check, next)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Errorf("answered in %s, TLS %v: want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	fence.Closed.Store(true)
	resp, err = c.Get(srv.URL)
	refusedAfterOne(t, "a request after the fence refused", resp, err, &arrived)
}

// A request that passed the fence and then waits for a connection (the
// host's connections are busy) is refused when the fence closes meanwhile:
// it is sent on a connection that asks before each write.
func TestARequestWaitingForAConnectionWhileTheFenceClosesReachesNobody(t *testing.T) {
	var arrived atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 1 {
			<-release
		}
		// A body keeps the connection the first request's until its
		// caller has read the answer.
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	fence := &notifytest.SwitchFence{}
	next := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(next.CloseIdleConnections)
	c := &http.Client{Transport: notify.FencedTransport(fence.Check, next)}
	post := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	first := make(chan error, 1)
	go func() { first <- post(context.Background()) }()
	for arrived.Load() == 0 {
		runtime.Gosched()
	}
	// The second request asks the transport for a connection once it is
	// past the fenced transport's check, and waits for the only one the
	// host may have.
	waiting := make(chan struct{})
	var once sync.Once
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GetConn: func(string) { once.Do(func() { close(waiting) }) },
	})
	second := make(chan error, 1)
	go func() { second <- post(ctx) }()
	<-waiting
	fence.Closed.Store(true)
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the request sent while the fence allowed: %v", err)
	}
	if err := <-second; !errors.Is(err, notifytest.ErrLeaseGone) {
		t.Errorf("the request that waited for a connection: error %v, want the fence's", err)
	}
	if n := arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server, want the one sent while the fence allowed", n)
	}
}

// KeepIdleConns keeps a fenced transport fenced and keeps as many idle
// connections per host as a sink has requests in flight: runs of eight
// requests at once dial eight connections in all, not six more every run.
func TestKeepIdleConnsKeepsAFencedTransportsConnectionsAndItsFence(t *testing.T) {
	var dialled atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	const n, runs = 8, 5
	fence := &notifytest.SwitchFence{}
	c := &http.Client{Transport: notify.KeepIdleConns(notify.FencedTransport(fence.Check, nil), n)}
	t.Cleanup(c.CloseIdleConnections)
	post := func() error {
		resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for range runs {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() { errs <- post() })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// A request may dial while another's connection is on its way back
	// to the pool: a run's worth of extra dials is allowed, not one a run.
	if got := dialled.Load(); got > 2*n {
		t.Errorf("%d runs of %d requests at once dialled %d connections, want %d and at most %d", runs, n, got, n, 2*n)
	}
	fence.Closed.Store(true)
	if err := post(); !errors.Is(err, notifytest.ErrLeaseGone) {
		t.Errorf("a request after the fence refused: error %v, want the fence's", err)
	}
}
