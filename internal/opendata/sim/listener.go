package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// listener serves a simulator's handler (a Server's or a Host's) on a TCP
// address or an httptest server, until it is closed.
type listener struct {
	mu      sync.Mutex
	httpSrv *http.Server
	testSrv *httptest.Server
	url     string
	served  chan error
}

// startTest serves h on an httptest server.
func (l *listener) startTest(h http.Handler) {
	ts := httptest.NewServer(h)
	l.mu.Lock()
	l.testSrv, l.url = ts, ts.URL
	l.mu.Unlock()
}

// start listens on addr (":0" picks a free port) and serves h in the
// background until close.
func (l *listener) start(h http.Handler, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.httpSrv != nil || l.testSrv != nil {
		ln.Close()
		return errors.New("sim: server already started")
	}
	l.httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	l.url = "http://" + ln.Addr().String()
	l.served = make(chan error, 1)
	go func(srv *http.Server, done chan<- error) { done <- srv.Serve(ln) }(l.httpSrv, l.served)
	return nil
}

// listenAndServe serves h on addr until ctx is done, then shuts down,
// giving requests in flight five seconds. It returns nil after a clean
// shutdown.
func (l *listener) listenAndServe(ctx context.Context, h http.Handler, addr string) error {
	if err := l.start(h, addr); err != nil {
		return err
	}
	l.mu.Lock()
	served := l.served
	l.mu.Unlock()
	select {
	case err := <-served:
		l.mu.Lock()
		l.httpSrv, l.served = nil, nil
		l.mu.Unlock()
		return err
	case <-ctx.Done():
	}
	return l.close()
}

// close stops serving and waits for it; closing a listener that does not
// serve does nothing.
func (l *listener) close() error {
	l.mu.Lock()
	srv, ts, served := l.httpSrv, l.testSrv, l.served
	l.httpSrv, l.testSrv, l.served = nil, nil, nil
	l.mu.Unlock()
	if ts != nil {
		ts.CloseClientConnections()
		ts.Close()
	}
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// URL returns the base URL served, without a trailing slash.
func (l *listener) URL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url
}
