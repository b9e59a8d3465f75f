package sim

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// Paths of the endpoints, relative to the base URL.
const (
	loginPath   = "/api/openapi/v1/common/login"
	servicePath = "/api/openapi/v1/service/"
	maxBody     = 1 << 20
)

// Options configure a Server. The zero value is a usable simulator: three
// stations with two systems of four devices each, one station shared from
// another tenant, the spec's limits, and no alarm churn.
type Options struct {
	// Seed makes the fleet, the alarms and the data deterministic.
	Seed int64
	// Stations, SystemsPerStation and DevicesPerSystem size the fleet;
	// defaults 3, 2 and 4.
	Stations          int
	SystemsPerStation int
	DevicesPerSystem  int
	// SharedStations is how many of the stations (the last ones), with their
	// systems and devices, are shared from another tenant. Zero means a third
	// of the stations; a negative number means none.
	SharedStations int

	// AppID and AppSecret are the credentials login accepts; defaults
	// "demo-app" and "demo-secret".
	AppID     string
	AppSecret string
	// MoreApps are further credentials login accepts, app id to secret:
	// several accounts of one upstream, which share its limit per IP. They
	// see the same fleet.
	MoreApps map[string]string
	// TokenTTL is how long a token is valid after its login; default 4 hours.
	TokenTTL time.Duration

	// RateLimit is how many requests one IP may make per Window; default 10.
	// A negative value turns the limit off.
	RateLimit int
	// Window is the length of the sliding rate-limit window; default 1 minute.
	Window time.Duration
	// Spacing, when set, makes the limiter also refuse a data request that
	// arrives sooner than Spacing after the one admitted before it from its
	// IP, as a limiter that spaces requests evenly does (a token bucket
	// without burst): the spec does not say which kind the upstream runs.
	Spacing time.Duration
	// HTTPErrors gives failure answers a matching HTTP status instead of 200:
	// 401 for token errors, 400 for parameter errors, 429 for rate limiting.
	// The envelope is written either way.
	HTTPErrors bool

	// IDs and Timestamps choose how ids and epoch-millisecond times are
	// written; default ShapeMixed.
	IDs        Shape
	Timestamps Shape
	// DeviceListInDataList answers getTenantDeviceList and
	// getStationDeviceList with data.dataList instead of an array in data.
	DeviceListInDataList bool

	// Churn is random alarm traffic that runs from New on.
	Churn Churn
	// Hostile makes the upstream misbehave as real vendors do; the zero
	// value behaves perfectly.
	Hostile Hostile
	// Clock is the source of all simulated time; default the real clock.
	Clock clock.Clock
	// Logger receives a line per refused request at info level and per
	// request at debug level; default none.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&o.Stations, 3)
	defInt(&o.SystemsPerStation, 2)
	defInt(&o.DevicesPerSystem, 4)
	switch {
	case o.SharedStations == 0:
		o.SharedStations = o.Stations / 3
	case o.SharedStations < 0:
		o.SharedStations = 0
	}
	o.SharedStations = min(o.SharedStations, o.Stations)
	if o.AppID == "" {
		o.AppID = "demo-app"
	}
	if o.AppSecret == "" {
		o.AppSecret = "demo-secret"
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = 4 * time.Hour
	}
	o.RateLimit, o.Window = rateLimit(o.RateLimit, o.Window)
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Server simulates the Open Data Service. It is an http.Handler; its methods
// are safe for concurrent use.
type Server struct {
	opts    Options
	clock   clock.Clock
	log     *slog.Logger
	fleet   *fleet
	eng     *engine
	tokens  *tokens
	traffic *traffic
	faults  *faults
	hostile *hostility
	ln      listener
}

// New returns a simulator for opts, with its fleet generated and its churn
// starting at the clock's current time. It does not listen; see Start,
// ListenAndServe and StartTest.
func New(opts Options) *Server {
	o := opts.withDefaults()
	f := newFleet(o)
	return &Server{
		opts:    o,
		clock:   o.Clock,
		log:     o.Logger,
		fleet:   f,
		eng:     newEngine(f, o.Seed, o.Churn, o.Clock.Now()),
		tokens:  newTokens(o.TokenTTL),
		traffic: newTraffic(o.RateLimit, o.Window, o.Spacing),
		faults:  newFaults(),
		hostile: newHostility(o, f),
	}
}

// TB is the part of testing.TB that StartTest needs.
type TB interface {
	Helper()
	Cleanup(func())
}

// StartTest starts a simulator for opts on an httptest server and closes it
// when the test ends.
func StartTest(tb TB, opts Options) *Server {
	tb.Helper()
	s := New(opts)
	s.ln.startTest(s)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Start listens on addr (":0" picks a free port) and serves in the
// background until Close. URL then returns the base URL.
func (s *Server) Start(addr string) error { return s.ln.start(s, addr) }

// ListenAndServe serves on addr until ctx is done, then shuts down, giving
// requests in flight five seconds. It returns nil after a clean shutdown.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	return s.ln.listenAndServe(ctx, s, addr)
}

// Close stops a server started by Start, ListenAndServe or StartTest and
// waits for it. Closing a server that is not running does nothing.
func (s *Server) Close() error { return s.ln.close() }

// URL returns the base URL of a started server, without a trailing slash.
func (s *Server) URL() string { return s.ln.URL() }

// Handler returns the simulator as an http.Handler.
func (s *Server) Handler() http.Handler { return s }

// Credentials returns the appId and appSecret that login accepts.
func (s *Server) Credentials() (appID, appSecret string) {
	return s.opts.AppID, s.opts.AppSecret
}

// Fleet returns the generated stations, systems and devices.
func (s *Server) Fleet() Fleet { return s.fleet.public() }

// Stats returns a copy of the request counters.
func (s *Server) Stats() Stats { return s.traffic.snapshot() }

// ResetStats sets every counter to zero and empties the arrival log. The
// rate limiter's memory is kept.
func (s *Server) ResetStats() { s.traffic.reset() }

// Arrivals returns the most recent arrivals (up to 100,000), oldest first.
func (s *Server) Arrivals() []Arrival { return s.traffic.arrivalLog() }

// MaxArrivals returns the largest number of requests that arrived from one IP
// within any span shorter than window: the figure to hold against the
// upstream's "10 requests per minute".
func (s *Server) MaxArrivals(window time.Duration) int {
	return maxInWindow(s.traffic.arrivalLog(), window)
}

// InjectFault queues f for endpoint (an Endpoint name or AnyEndpoint). Faults
// of one endpoint apply in the order injected, each to its Count requests
// that pass the rate limit; an endpoint's own faults come before AnyEndpoint
// ones.
func (s *Server) InjectFault(endpoint string, f Fault) error { return s.faults.inject(endpoint, f) }

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.clear() }

// PollerOverlaps returns the pairs of access tokens that were used over
// overlapping spans of time: every client logs in and then polls with its
// own token, so a pair is two clients polling this tenant at the same
// moment. Replicas that hand a tenant over correctly leave it empty.
func (s *Server) PollerOverlaps() [][2]TokenUse { return s.tokens.overlaps() }

// TokenUses returns when each access token was first and last accepted,
// earliest first: a client's polling from its login on.
func (s *Server) TokenUses() []TokenUse { return s.tokens.list() }

// ExpireTokens makes every token issued so far expired, as if TokenTTL had
// passed.
func (s *Server) ExpireTokens() { s.tokens.expireAll(s.clock.Now()) }

// Tick applies every scheduled and churned alarm transition due by the
// clock's current time. Requests and the alarm methods do this themselves.
func (s *Server) Tick() { s.eng.tick(s.clock.Now()) }

// StartAlarm starts an alarm now and returns its originId. It fails for an
// unknown device, a level outside 0..3, or an occurrence in the future.
func (s *Server) StartAlarm(spec AlarmSpec) (string, error) { return s.eng.start(s.clock.Now(), spec) }

// EndAlarm ends an ongoing alarm (status 0) with recovery time at, zero
// meaning now. at may not be before the occurrence nor after now.
func (s *Server) EndAlarm(id string, at time.Time) error {
	return s.eng.finish(s.clock.Now(), id, at, StatusEnded)
}

// InvalidateAlarm ends an ongoing alarm as invalid (status -1) at at, zero
// meaning now, with the limits of EndAlarm.
func (s *Server) InvalidateAlarm(id string, at time.Time) error {
	return s.eng.finish(s.clock.Now(), id, at, StatusInvalid)
}

// Schedule registers an alarm that starts at sc.StartAt and ends at sc.EndAt,
// applied as the clock passes those times, and returns its originId at once.
// Until it starts, Alarm does not know it and getAlarmList does not show it.
func (s *Server) Schedule(sc Scheduled) (string, error) { return s.eng.schedule(s.clock.Now(), sc) }

// Storm starts n alarms at once on random devices with levels weighted by the
// churn's LevelWeights, and returns their originIds.
func (s *Server) Storm(n int) []string { return s.eng.storm(s.clock.Now(), n) }

// Backfill adds n alarms that occurred within span before now and have
// already ended (some as invalid, per the churn's InvalidFraction): a tenant's
// history, as a first run finds it.
func (s *Server) Backfill(n int, span time.Duration) { s.eng.backfill(s.clock.Now(), n, span) }

// SetChurn replaces the random alarm traffic from now on; a zero Churn stops
// it. Alarms already started keep their scheduled ends.
func (s *Server) SetChurn(c Churn) { s.eng.setChurn(s.clock.Now(), c) }

// Alarm returns the alarm with the given originId, once it has started.
func (s *Server) Alarm(id string) (Alarm, bool) {
	a, ok := s.eng.get(s.clock.Now(), id)
	if !ok {
		return Alarm{}, false
	}
	return s.eng.view(a), true
}

// Ongoing returns the ongoing alarms, in getAlarmList order.
func (s *Server) Ongoing() []Alarm {
	as := s.eng.ongoingAlarms(s.clock.Now())
	out := make([]Alarm, len(as))
	for i, a := range as {
		out[i] = s.eng.view(a)
	}
	return out
}

// AlarmCounts counts the alarms tracked, by status.
func (s *Server) AlarmCounts() AlarmCounts { return s.eng.counts(s.clock.Now()) }

// answer is a response before it is written.
type answer struct {
	status  int
	header  http.Header
	env     envelope
	outcome outcome
}

// ServeHTTP answers one request: rate limit, routing, injected faults, token
// and parameters, in that order.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	// The Date header tells the upstream's clock; net/http would write the
	// wall clock, which a fake clock does not follow.
	w.Header().Set("Date", s.upstreamTime(now).UTC().Format(http.TimeFormat))
	name := endpointName(r.URL.Path)
	ip := remoteIP(r)
	if ok, wait := s.traffic.arrive(ip, name, now); !ok {
		s.log.Info("sim: rate limit exceeded", "ip", ip, "endpoint", name)
		s.write(w, s.rateLimited(wait), false)
		return
	}
	if name == unknownEndpoint {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The body is read before any delay, so that a client hanging up
	// cancels the request's context.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	ft, faulty := s.faults.take(name)
	if faulty && s.applyFault(w, r, name, ft) {
		return
	}
	ans := s.serve(r, body, err, name, now)
	s.traffic.record(name, ans.outcome)
	s.log.Debug("sim: request", "ip", ip, "endpoint", name, "code", ans.env.Code)
	s.write(w, ans, faulty && ft.Kind == FaultTruncated)
}

// applyFault answers with the injected fault ft, or delays the request, and
// reports whether the request is answered.
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, name string, ft Fault) bool {
	s.traffic.record(name, outcomeFault)
	s.log.Debug("sim: injecting fault", "endpoint", name, "fault", ft.Kind.String())
	switch ft.Kind {
	case FaultServerError:
		http.Error(w, "upstream unavailable", ft.Status)
	case FaultEnvelope:
		s.write(w, answer{status: http.StatusOK, env: envelope{Code: CodeThirdParty, Description: descThirdParty}}, false)
	case FaultMalformedJSON:
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		_, _ = io.WriteString(w, `{"code":"00000","description":"success","data":{"dataList":[{"id":,}]}`)
	case FaultRateLimited:
		s.write(w, s.rateLimited(s.opts.Window), false)
	case FaultExpiredToken:
		s.write(w, s.failure(&apiError{CodeTokenExpired, descTokenExpired}), false)
	case FaultDelay:
		t := time.NewTimer(ft.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			return false
		case <-r.Context().Done():
		}
	default: // FaultTruncated alters the answer once it is made.
		return false
	}
	return true
}

func (s *Server) write(w http.ResponseWriter, a answer, truncate bool) {
	body, err := json.Marshal(a.env)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	for k, vs := range a.header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(a.status)
	if truncate {
		body = body[:len(body)/2]
	}
	_, _ = w.Write(body)
}

// statusFor is the HTTP status of a failure code.
func (s *Server) statusFor(code string) int {
	if !s.opts.HTTPErrors {
		return http.StatusOK
	}
	switch {
	case strings.HasPrefix(code, "A02"), strings.HasPrefix(code, "A03"):
		return http.StatusUnauthorized
	case strings.HasPrefix(code, "A04"):
		return http.StatusBadRequest
	case strings.HasPrefix(code, "A05"):
		return http.StatusTooManyRequests
	}
	return http.StatusOK
}

func (s *Server) failure(e *apiError) answer {
	return answer{status: s.statusFor(e.code), env: envelope{Code: e.code, Description: e.desc}, outcome: outcomeError}
}

func (s *Server) rateLimited(wait time.Duration) answer {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	a := s.failure(&apiError{CodeRateLimited, descRateLimited})
	a.header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
	return a
}

func success(data any) answer {
	return answer{status: http.StatusOK, env: envelope{Code: CodeSuccess, Description: descSuccess, Data: data}}
}

// serve answers an admitted POST to a known endpoint.
func (s *Server) serve(r *http.Request, body []byte, readErr error, name string, now time.Time) answer {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil ||
		(mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		a := s.failure(errorf(CodeBadParameter, "Content-Type must be application/json"))
		a.status = http.StatusUnsupportedMediaType
		return a
	}
	if readErr != nil {
		return s.failure(errorf(CodeBadParameter, "request body unreadable or larger than %d bytes", maxBody))
	}
	p, aerr := parseParams(body)
	if name == EndpointLogin {
		return s.login(p, aerr, now)
	}
	if aerr == nil {
		aerr = s.tokens.check(r, now)
	}
	if aerr != nil {
		return s.failure(aerr)
	}
	data, aerr := handlers[name](s, p, now)
	if aerr != nil {
		return s.failure(aerr)
	}
	return success(data)
}

// handlers serve the data endpoints once the token is checked.
var handlers = map[string]func(*Server, params, time.Time) (any, *apiError){
	EndpointStationList:    (*Server).stationList,
	EndpointSystemList:     (*Server).systemList,
	EndpointDeviceList:     (*Server).deviceList,
	EndpointStationDevices: (*Server).stationDevices,
	EndpointStationDetail:  (*Server).stationDetail,
	EndpointAlarmList:      (*Server).alarmList,
	EndpointRealTime:       (*Server).realTime,
	EndpointSystemHistory:  (*Server).systemHistory,
	EndpointStationHistory: (*Server).stationHistory,
	EndpointDeviceHistory:  (*Server).deviceHistory,
}

func knownEndpoint(name string) bool {
	_, ok := handlers[name]
	return ok || name == EndpointLogin
}

// endpointName maps a path to its endpoint name, or unknownEndpoint.
func endpointName(path string) string {
	if path == loginPath {
		return EndpointLogin
	}
	if name, ok := strings.CutPrefix(path, servicePath); ok {
		if _, known := handlers[name]; known {
			return name
		}
	}
	return unknownEndpoint
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// login answers the login endpoint. Its failures carry errorMsg and errorKey.
func (s *Server) login(p params, perr *apiError, now time.Time) answer {
	fail := func(code, desc, msg string) answer {
		return answer{
			status: s.statusFor(code), outcome: outcomeLoginFailure,
			env: envelope{Code: code, Description: desc, ErrorMsg: msg, ErrorKey: "be_ErrorCode_" + code},
		}
	}
	if perr != nil {
		return fail(perr.code, perr.desc, perr.desc)
	}
	grant, _, aerr := p.str("grantType")
	if aerr == nil && grant != "" && grant != "client_credentials" {
		aerr = errorf(CodeBadParameter, "grantType %q is not supported", grant)
	}
	if aerr != nil {
		return fail(aerr.code, aerr.desc, aerr.desc)
	}
	appID, _, _ := p.str("appId")
	secret, _, _ := p.str("appSecret")
	ok := credentialsMatch(appID, secret, s.opts.AppID, s.opts.AppSecret)
	for id, sec := range s.opts.MoreApps {
		ok = credentialsMatch(appID, secret, id, sec) || ok
	}
	if !ok {
		return fail(CodeThirdParty, descThirdParty, descAuthFailed)
	}
	tok := s.tokens.issue(now)
	t := s.fleet.tenant
	a := success(map[string]any{
		"accessToken": tok,
		"tokenType":   "bearer",
		"expiresIn":   strconv.Itoa(int(s.opts.TokenTTL.Seconds())),
		"scope":       "tenantId:" + t.id,
		"tenantInfo": map[string]any{
			"id": t.id, "name": t.name, "enable": true, "activate": true,
			"customerCode": t.customerCode, "creatorId": t.creatorID,
			"createTime": formatUpstream(s.upstreamTime(t.created)), "updateTime": formatUpstream(s.upstreamTime(t.updated)),
			"fromSupport": false, "tenantManager": false,
		},
	})
	a.header = http.Header{"TOKEN": {tok}}
	a.outcome = outcomeLogin
	return a
}

// rateLimit returns the requests a window admits and the window, as the
// options give them: 0 is the upstream's 10, a negative limit none (0), and
// a window that is not positive a minute.
func rateLimit(limit int, window time.Duration) (int, time.Duration) {
	switch {
	case limit == 0:
		limit = 10
	case limit < 0:
		limit = 0
	}
	if window <= 0 {
		window = time.Minute
	}
	return limit, window
}
