package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// Host is one upstream address serving several accounts: each account is a
// Server of its own (its credentials, fleet, alarms and tokens), and the
// rate limit per IP is counted across all of them, as the real service
// counts it (the spec: 10 requests per minute per IP, whatever the
// account). A login goes to the account its appId names, a data request to
// the account that issued its token.
type Host struct {
	clock    clock.Clock
	accounts []*Server
	traffic  *traffic
	ln       listener
}

// HostOptions configure a Host's rate limit.
type HostOptions struct {
	// RateLimit is how many requests one IP may make per Window, to all
	// accounts together; default 10. A negative value turns it off.
	RateLimit int
	// Window is the length of the sliding window; default 1 minute.
	Window time.Duration
	// Clock is the source of time; default the real clock.
	Clock clock.Clock
}

// NewHost returns a Host serving accounts, which must have distinct app ids
// and no rate limit of their own (RateLimit -1): the host's applies.
func NewHost(opts HostOptions, accounts ...*Server) (*Host, error) {
	if len(accounts) == 0 {
		return nil, errors.New("sim: a host needs at least one account")
	}
	ids := map[string]bool{}
	for i, a := range accounts {
		if a.opts.RateLimit != 0 {
			return nil, fmt.Errorf("sim: account %d (%s) has a rate limit of its own (%d a window): give it RateLimit -1, the host's limit applies",
				i+1, a.opts.AppID, a.opts.RateLimit)
		}
		for _, id := range append([]string{a.opts.AppID}, keys(a.opts.MoreApps)...) {
			if ids[id] {
				return nil, fmt.Errorf("sim: app id %q names two accounts of the host", id)
			}
			ids[id] = true
		}
	}
	opts.RateLimit, opts.Window = rateLimit(opts.RateLimit, opts.Window)
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	return &Host{clock: opts.Clock, accounts: accounts, traffic: newTraffic(opts.RateLimit, opts.Window, 0)}, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ServeHTTP applies the host's rate limit and hands the request to its
// account.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.clock.Now()
	name := endpointName(r.URL.Path)
	if ok, wait := h.traffic.arrive(remoteIP(r), name, now); !ok {
		first := h.accounts[0]
		w.Header().Set("Date", first.upstreamTime(now).UTC().Format(http.TimeFormat))
		first.log.Info("sim: rate limit exceeded", "ip", remoteIP(r), "endpoint", name)
		first.write(w, first.rateLimited(wait), false)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		body = nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.account(r, name, body).ServeHTTP(w, r)
}

// account returns the account a request is for: the one whose app id a
// login names, or whose token a data request carries; the first one when
// none is (it refuses the request as any account would).
func (h *Host) account(r *http.Request, name string, body []byte) *Server {
	if name == EndpointLogin {
		if p, err := parseParams(body); err == nil {
			id, _, _ := p.str("appId")
			for _, a := range h.accounts {
				if _, more := a.opts.MoreApps[id]; id == a.opts.AppID || more {
					return a
				}
			}
		}
		return h.accounts[0]
	}
	tok := bearerToken(r)
	for _, a := range h.accounts {
		if a.tokens.issued(tok) {
			return a
		}
	}
	return h.accounts[0]
}

// Accounts returns the host's accounts, in the order given.
func (h *Host) Accounts() []*Server { return h.accounts }

// Stats returns the host's request counters: every account's requests, and
// the refusals of its rate limit.
func (h *Host) Stats() Stats { return h.traffic.snapshot() }

// Arrivals returns the most recent arrivals at the host (up to 100,000),
// oldest first.
func (h *Host) Arrivals() []Arrival { return h.traffic.arrivalLog() }

// MaxArrivals returns the largest number of requests that arrived from one
// IP within any span shorter than window, at all accounts together.
func (h *Host) MaxArrivals(window time.Duration) int {
	return maxInWindow(h.traffic.arrivalLog(), window)
}

// Start listens on addr (":0" picks a free port) and serves in the
// background until Close. URL then returns the base URL.
func (h *Host) Start(addr string) error { return h.ln.start(h, addr) }

// URL returns the base URL of a started host, without a trailing slash.
func (h *Host) URL() string { return h.ln.URL() }

// Close stops a host started by Start and waits for it.
func (h *Host) Close() error { return h.ln.close() }
