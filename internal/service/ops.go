package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/redact"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewLogger returns the process logger: JSON or text lines on w at the given
// level (debug, info, warn, error).
//
// Every line is cleaned of the values in secrets (nil: none), which Run
// fills with the configuration's and the rules' secrets.
func NewLogger(w io.Writer, level, format string, secrets *redact.Set) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: readableDurations}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(secrets.Handler(h))
}

// readableDurations writes durations as text ("830ms", "20s") rather than
// the JSON handler's nanosecond integers.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// Check is one readiness condition; it returns nil when the condition holds.
// An advisory check is shown in /readyz but does not make it fail: it tells
// an operator something is degraded where taking the pod out of its
// Services would not help.
type Check struct {
	Name     string
	Func     func() error
	Advisory bool
}

// OpsServer serves /healthz (the process is alive), /readyz (every check
// holds) and /metrics (Prometheus) on one listener, over plain HTTP or,
// after UseTLS, HTTPS.
type OpsServer struct {
	srv *http.Server
	ln  net.Listener
	mux *http.ServeMux
}

// UseTLS makes Serve answer over HTTPS only, with the certificate of
// certs; call it before Serve. Failed handshakes (a client that does not
// trust the certificate, a plain HTTP request) are logged at debug level.
func (o *OpsServer) UseTLS(certs *CertFiles) {
	o.srv.TLSConfig = certs.Config()
	o.srv.ErrorLog = slog.NewLogLogger(certs.log.Handler(), slog.LevelDebug)
}

// Handle adds a handler for pattern; call it before Serve.
func (o *OpsServer) Handle(pattern string, h http.Handler) { o.mux.Handle(pattern, h) }

// ListenOps binds addr and prepares the ops endpoints; Serve starts them.
func ListenOps(addr string, gatherer prometheus.Gatherer, checks []Check) (*OpsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ops: listen on %s (RELAY_LISTEN): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		status := map[string]string{}
		ok := true
		for _, c := range checks {
			if err := c.Func(); err != nil {
				status[c.Name] = err.Error()
				ok = ok && c.Advisory
			} else {
				status[c.Name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(status)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	o := &OpsServer{srv: &http.Server{Handler: mux, MaxHeaderBytes: opsMaxHeaderBytes}, ln: ln, mux: mux}
	o.setTimeouts(defaultOpsTimeouts)
	return o, nil
}

// The ops listener's bounds on a client, so that one who reaches the port
// (before any login) cannot hold connections, and so the file descriptors
// the poller and the sinks need, by sending slowly or not at all:
//
//   - opsReadHeaderTimeout: a request's headers arrive within 5 s;
//   - opsReadTimeout: the whole request, body included, within 10 s (the
//     console's forms and the ops API's bodies are a few KiB);
//   - opsWriteTimeout: the answer is written within 30 s of the request
//     (History and the reports are the slowest pages, well under that); the
//     console's live-update stream lifts it and bounds each of its writes;
//   - opsIdleTimeout: a keep-alive connection waits 10 s for its next
//     request (a browser reopens one at once);
//   - opsMaxHeaderBytes: the headers are at most 64 KiB (a session cookie
//     and a Bearer token are under 100 bytes).
//
// docs/operate.md states them.
const (
	opsReadHeaderTimeout = 5 * time.Second
	opsReadTimeout       = 10 * time.Second
	opsWriteTimeout      = 30 * time.Second
	opsIdleTimeout       = 10 * time.Second
	opsMaxHeaderBytes    = 64 << 10
)

// opsTimeouts are the ops listener's timeouts; tests shorten them.
type opsTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultOpsTimeouts are the timeouts of a real run.
var defaultOpsTimeouts = opsTimeouts{readHeader: opsReadHeaderTimeout, read: opsReadTimeout, write: opsWriteTimeout, idle: opsIdleTimeout}

// setTimeouts sets the server's timeouts (the zero value: the defaults);
// call it before Serve.
func (o *OpsServer) setTimeouts(t opsTimeouts) {
	if t == (opsTimeouts{}) {
		t = defaultOpsTimeouts
	}
	o.srv.ReadHeaderTimeout, o.srv.ReadTimeout, o.srv.WriteTimeout, o.srv.IdleTimeout = t.readHeader, t.read, t.write, t.idle
}

// OnShutdown registers f to run when the server starts shutting down: it
// ends the requests that never end by themselves (the console's live-update
// streams), which the shutdown would otherwise wait for.
func (o *OpsServer) OnShutdown(f func()) { o.srv.RegisterOnShutdown(f) }

// Addr returns the address the server listens on.
func (o *OpsServer) Addr() string { return o.ln.Addr().String() }

// opsShutdownWait bounds how long the ops server waits for open requests
// when it shuts down.
const opsShutdownWait = time.Second

// Serve answers requests until ctx is done, then shuts down within a second.
func (o *OpsServer) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if o.srv.TLSConfig != nil {
			errc <- o.srv.ServeTLS(o.ln, "", "")
			return
		}
		errc <- o.srv.Serve(o.ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("ops: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), opsShutdownWait)
	defer cancel()
	err := o.srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("ops: %w", serr)
	}
	return err
}
