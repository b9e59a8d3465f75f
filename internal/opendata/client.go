// Package opendata is the client of the energy-monitoring Open Data Service:
// all eleven endpoints of the vendor's interface, the access token, the
// shared rate budget and the classification of failures. docs/design.md §3
// says what the interface leaves open and what the client decides.
//
// Every request of a Client, login included, first waits on the Client's
// Budget, so that the process never starts more than Config.RateLimit
// requests in any minute. The Client never retries on its own, except for
// one new login when a request is refused for its token; callers decide about
// retries from the Kind of the *Error they get. Asks larger than an
// endpoint's limits are split into several calls and merged into one answer.
package opendata

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/tracing"
)

// Config configures a Client. BaseURL, AppID and AppSecret are required;
// every other field has a default.
type Config struct {
	// BaseURL is the service's base address, such as https://example.com;
	// endpoint paths (/api/openapi/v1/...) are appended to it.
	BaseURL string
	// AppID and AppSecret are the client credentials of the login.
	AppID     string
	AppSecret string
	// GrantType is the login's grantType; default client_credentials.
	GrantType string
	// AuthScheme is empty to send "Authorization: <token>", or Bearer to
	// send "Authorization: Bearer <token>".
	AuthScheme string
	// RateLimit is the most requests started in any minute; default 10.
	RateLimit int
	// Location is the zone of the upstream's zone-less time strings
	// (occurrenceTimeStr and the like); default UTC.
	Location *time.Location
	// Clock drives the token lifetime and the rate budget; default the
	// wall clock.
	Clock clock.Clock
	// HTTPClient sends the requests; default a new http.Client. The Client
	// works on a copy and leaves the one given unchanged.
	HTTPClient *http.Client
	// Tracer, when on, makes a client span of every request sent within a
	// traced poll: method, server, status and the URL without its query,
	// never a header or a body. Nil makes none.
	Tracer *tracing.Tracer
	// Timeout bounds each request, from sending to the end of the answer;
	// default 30s.
	Timeout time.Duration
	// Logger receives the client's log lines; default none.
	Logger *slog.Logger
	// Metrics, when set, counts requests and exposes the budget.
	Metrics *Metrics
	// BudgetFile, when set, is the budget shared by every process of this
	// host: the start times of the last minute's requests, read at New and
	// checked and rewritten under a lock at every request start, so that
	// relay api beside a running relay, or a relay restarted after a crash,
	// keeps the host within the upstream's limit. It is one SharedBudget;
	// set it or Shared, not both.
	BudgetFile string
	// Shared, when set, is a budget shared with other processes behind the
	// same IP, such as the replicas of one egress group: every request start
	// is reserved there too after the Client's own Budget granted it.
	Shared SharedBudget
	// Budget, when set, is the budget of the upstream address that the
	// clients of several tenants share (NewBudget): the client joins it as
	// one tenant and its requests wait there, instead of on a budget of
	// its own; RateLimit must then be unset or the budget's. A budget file
	// given beside it is only reserved in, not read: the budget read it
	// when it was made (BudgetConfig.File).
	Budget *Budget
}

// Token lifetime rules (docs/design.md §3).
const (
	tokenLifetime = 4 * time.Hour
	renewBefore   = 5 * time.Minute
)

const (
	defaultRateLimit = 10
	defaultTimeout   = 30 * time.Second
	defaultGrantType = "client_credentials"
	// maxBody bounds an answer read into memory, after its strings were
	// bounded to MaxStringBytes; a full alarm page of 500 records is well
	// under 2 MiB, and about 9 MiB with a cut 16 KiB payload in each. A
	// larger answer (records of thousands of fields) is refused rather than
	// decoded, since decoding holds a few copies of it.
	maxBody = 32 << 20
	// apiPrefix is the path of every endpoint below the base URL.
	apiPrefix = "/api/openapi/v1/"
)

// Client calls the Open Data Service. It is safe for concurrent use; all its
// requests share one login and one Budget.
type Client struct {
	baseURL    string
	appID      string
	appSecret  string
	grantType  string
	authScheme string
	loc        *time.Location
	clock      clock.Clock
	timeout    time.Duration
	log        *slog.Logger
	metrics    *Metrics
	http       *resty.Client
	budget     *Budget
	// share is the client's part of budget, as one of its tenants.
	share *share
	// shared is the budget shared with other processes, or nil.
	shared SharedBudget

	// loginSlot lets one goroutine log in at a time; the others wait for
	// its token instead of logging in too.
	loginSlot chan struct{}

	mu      sync.Mutex
	token   string
	renewAt time.Time
	// secrets are the values never to show in errors or logs: the app
	// secret, the base URL's password, then the tokens issued so far (the
	// last few); the first static of them are kept.
	secrets []string
	static  int
	// lastSkipped identifies the unusable alarm rows last warned about.
	lastSkipped string
	// upClock estimates the upstream's clock from its Date headers.
	upClock upstreamClock
	// sharedFailing is set while the shared budget cannot be used, so
	// that this is warned about once, not at every request.
	sharedFailing atomic.Bool
	// refused is set while the latest login was refused for its
	// credentials.
	refused atomic.Bool
}

// CredentialsRefused reports whether the latest login was refused for its
// credentials (ErrCredentials); a successful login clears it.
func (c *Client) CredentialsRefused() bool { return c.refused.Load() }

// New returns a Client for cfg. It does not contact the upstream; the first
// request logs in.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("opendata: base URL %q: want an http:// or https:// URL", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.AppID) == "" {
		return nil, errors.New("opendata: app id is empty")
	}
	if cfg.AppSecret == "" {
		return nil, errors.New("opendata: app secret is empty")
	}
	scheme := ""
	switch strings.ToLower(strings.TrimSpace(cfg.AuthScheme)) {
	case "":
	case "bearer":
		scheme = "Bearer"
	default:
		return nil, fmt.Errorf("opendata: auth scheme %q: want empty or Bearer", cfg.AuthScheme)
	}
	if cfg.BudgetFile != "" && cfg.Shared != nil {
		return nil, errors.New("opendata: both a budget file and a shared budget are set: a client shares its request budget in one place")
	}
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("opendata: rate limit %d: want a positive number of requests per minute", cfg.RateLimit)
	}
	c := &Client{
		baseURL:    base,
		appID:      cfg.AppID,
		appSecret:  cfg.AppSecret,
		grantType:  orDefault(cfg.GrantType, defaultGrantType),
		authScheme: scheme,
		loc:        cfg.Location,
		clock:      cfg.Clock,
		timeout:    cfg.Timeout,
		log:        cfg.Logger,
		metrics:    cfg.Metrics,
		loginSlot:  make(chan struct{}, 1),
		secrets:    []string{cfg.AppSecret},
	}
	if p, ok := u.User.Password(); ok {
		// The base URL's credentials go out as HTTP Basic: an echo of the
		// request would show them, encoded or not.
		name := u.User.Username()
		c.secrets = append(c.secrets, p, base64.StdEncoding.EncodeToString([]byte(name+":"+p)))
	}
	c.static = len(c.secrets)
	if c.loc == nil {
		c.loc = time.UTC
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Budget != nil && cfg.RateLimit != 0 && cfg.RateLimit != cfg.Budget.max:
		return nil, fmt.Errorf("opendata: rate limit %d beside a shared budget of %d: a shared budget's limit is the address's, leave the client's unset",
			cfg.RateLimit, cfg.Budget.max)
	case cfg.Budget != nil:
		c.budget = cfg.Budget
	default:
		rate := cfg.RateLimit
		if rate == 0 {
			rate = defaultRateLimit
		}
		c.budget = newBudget(c.clock, rate)
	}
	c.metrics.attach(c.budget)
	if cfg.BudgetFile != "" {
		if cfg.Budget == nil {
			starts, err := readBudgetFile(cfg.BudgetFile)
			if err != nil {
				return nil, err
			}
			c.budget.Preload(starts)
		}
		c.shared = budgetFile(cfg.BudgetFile)
	}
	c.share = c.budget.join()
	if cfg.Shared != nil {
		c.shared = cfg.Shared
	}

	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	if cfg.Tracer.Enabled() {
		hc.Transport = cfg.Tracer.Transport(hc.Transport)
	}
	// Redirects are refused: following one re-posts the app secret (or the
	// token) to an address nobody configured.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = resty.NewWithClient(hc).
		SetRetryCount(0).
		SetDoNotParseResponse(true).
		SetLogger(restyLogger{c}).
		SetHeader("User-Agent", "relay")
	return c, nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// minTokenLifetimeSecs is the least expiresIn taken at its word.
const minTokenLifetimeSecs = 600

// Budget returns the rate budget all requests of c share: its own, or the
// one shared with other tenants' clients (Config.Budget).
func (c *Client) Budget() *Budget { return c.budget }

// SetDemand tells c's budget what waits to be detected in c's upstream
// account, so that a budget shared with other tenants can weigh c's
// requests against theirs (ScheduleLatency).
func (c *Client) SetDemand(d Demand) { c.budget.setDemand(c.share, d) }

// Close takes c out of its budget: a budget shared with other tenants no
// longer counts it. c must not be used afterwards.
func (c *Client) Close() { c.budget.leave(c.share) }

// LoginResult is the answer of a login, without the token itself.
type LoginResult struct {
	TokenType string `json:"tokenType"`
	// ExpiresIn is the login's expiresIn as received; its unit is not
	// specified, so it only shortens the token's life when it reads as a
	// number of seconds from 10 minutes to under 4 h.
	ExpiresIn string `json:"expiresIn"`
	// Scope is "tenantId:<tenant id>"; TenantID is the id in it.
	Scope    string     `json:"scope"`
	TenantID string     `json:"tenantId"`
	Tenant   TenantInfo `json:"tenant"`
	// IssuedAt and ExpiresAt are when the client received the token and
	// when it treats it as expired.
	IssuedAt  time.Time `json:"issuedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Raw is the login's data object as received, with accessToken
	// replaced by "[redacted]".
	Raw json.RawMessage `json:"raw"`
}

// TenantInfo describes the tenant of the credentials.
type TenantInfo struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Enable        bool      `json:"enable"`
	Activate      bool      `json:"activate"`
	CustomerCode  string    `json:"customerCode"`
	CreatorID     string    `json:"creatorId"`
	CreateTime    time.Time `json:"createTime"`
	UpdateTime    time.Time `json:"updateTime"`
	FromSupport   bool      `json:"fromSupport"`
	TenantManager bool      `json:"tenantManager"`
}

// Login logs in now, whether or not the current token is still valid, and
// makes the new token the one later requests use.
func (c *Client) Login(ctx context.Context) (*LoginResult, error) {
	select {
	case c.loginSlot <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("opendata: login: %w", ctx.Err())
	}
	defer func() { <-c.loginSlot }()
	return c.login(ctx, "requested")
}

// currentToken returns a token valid for a while yet, logging in when there
// is none or the one held is within 5 minutes of expiry.
func (c *Client) currentToken(ctx context.Context) (string, error) {
	if tok := c.validToken(); tok != "" {
		return tok, nil
	}
	select {
	case c.loginSlot <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("opendata: login: %w", ctx.Err())
	}
	defer func() { <-c.loginSlot }()
	// Another goroutine may have logged in while this one waited.
	if tok := c.validToken(); tok != "" {
		return tok, nil
	}
	c.mu.Lock()
	reason := "no token"
	if c.token != "" {
		reason = "token near expiry"
	}
	c.mu.Unlock()
	if _, err := c.login(ctx, reason); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token, nil
}

func (c *Client) validToken() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.clock.Now().Before(c.renewAt) {
		return c.token
	}
	return ""
}

// dropToken forgets tok after the upstream refused it, unless a newer token
// has replaced it already.
func (c *Client) dropToken(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == tok {
		c.token = ""
	}
}

// login performs the login request; the caller holds loginSlot.
func (c *Client) login(ctx context.Context, reason string) (*LoginResult, error) {
	body := map[string]any{"grantType": c.grantType, "appId": c.appID, "appSecret": c.appSecret}
	ans, err := c.send(ctx, endpointLogin, body, "")
	var oe *Error
	if errors.As(err, &oe) && ctx.Err() == nil && refusesCredentials(oe) {
		oe.Kind = KindAuth
		if oe.Err == nil {
			oe.Err = ErrCredentials
		} else {
			oe.Err = fmt.Errorf("%w: %w", ErrCredentials, oe.Err)
		}
		c.refused.Store(true)
		c.metrics.credentialsRefused(true)
		// The caller reports it: the poller with its back-off, relay api
		// and relay check with their exit.
		c.log.Debug("upstream login refused", "reason", reason, "err", err)
		return nil, err
	}
	if err != nil {
		c.log.Warn("upstream login failed", "reason", reason, "err", err)
		return nil, err
	}
	c.refused.Store(false)
	c.metrics.credentialsRefused(false)
	f, _ := objectFields(ans.data)
	tok := ""
	for k, v := range ans.header {
		if strings.EqualFold(k, "Token") && len(v) > 0 && strings.TrimSpace(v[0]) != "" {
			tok = strings.TrimSpace(v[0])
			break
		}
	}
	if tok == "" {
		tok = strings.TrimSpace(f.str("accessToken"))
	}
	if tok == "" {
		return nil, &Error{Endpoint: endpointLogin, Kind: KindTransient, HTTPStatus: ans.status,
			Err: errors.New("the answer carries no token, neither in the TOKEN header nor in data.accessToken")}
	}
	now := c.clock.Now()
	life := tokenLifetime
	// expiresIn is read as seconds only between 10 minutes and 4 hours: a
	// smaller number is more likely hours or minutes than a token that would
	// make every other request a login, and an expired token is caught
	// anyway by the reactive re-login.
	if secs, ok := f.int("expiresIn"); ok && secs >= minTokenLifetimeSecs && time.Duration(secs)*time.Second < tokenLifetime {
		life = time.Duration(secs) * time.Second
	}
	res := &LoginResult{
		TokenType: f.str("tokenType"),
		ExpiresIn: f.str("expiresIn"),
		Scope:     f.str("scope"),
		IssuedAt:  now,
		ExpiresAt: now.Add(life),
		Raw:       redactedLoginData(f),
	}
	if id, ok := strings.CutPrefix(res.Scope, "tenantId:"); ok {
		res.TenantID = id
	}
	if t, err := objectFields(f["tenantInfo"]); err == nil {
		res.Tenant = TenantInfo{
			ID:            t.str("id"),
			Name:          t.str("name"),
			Enable:        t.bool("enable"),
			Activate:      t.bool("activate"),
			CustomerCode:  t.str("customerCode"),
			CreatorID:     t.str("creatorId"),
			CreateTime:    t.localTime("createTime", c.loc),
			UpdateTime:    t.localTime("updateTime", c.loc),
			FromSupport:   t.bool("fromSupport"),
			TenantManager: t.bool("tenantManager"),
		}
		if res.TenantID == "" {
			res.TenantID = res.Tenant.ID
		}
	}
	c.mu.Lock()
	c.token = tok
	c.renewAt = res.ExpiresAt.Add(-min(renewBefore, life/2))
	c.secrets = append(c.secrets, tok)
	if len(c.secrets) > c.static+3 {
		c.secrets = append(c.secrets[:c.static], c.secrets[len(c.secrets)-3:]...)
	}
	c.mu.Unlock()
	c.log.Info("upstream login", "reason", reason, "upstream_tenant", res.TenantID, "expires_at", res.ExpiresAt)
	return res, nil
}

// redactedLoginData returns the login data with the token replaced.
func redactedLoginData(f fields) json.RawMessage {
	if f == nil {
		return nil
	}
	if _, ok := f["accessToken"]; ok {
		f["accessToken"] = json.RawMessage(`"[redacted]"`)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	return b
}

// call sends one data request with the current token and returns the
// envelope's data. An auth error makes it log in again and send once more.
func (c *Client) call(ctx context.Context, endpoint string, body any) (json.RawMessage, error) {
	for attempt := 1; ; attempt++ {
		tok, err := c.currentToken(ctx)
		if err != nil {
			return nil, err
		}
		ans, err := c.send(ctx, endpoint, body, tok)
		if err == nil {
			return ans.data, nil
		}
		if attempt == 1 && errors.Is(err, ErrAuth) {
			c.log.Info("upstream refused the token; logging in again", "endpoint", endpoint, "err", err)
			c.dropToken(tok)
			continue
		}
		return nil, err
	}
}

// answer is a successful response.
type answer struct {
	status int
	header http.Header
	data   json.RawMessage
	// upstreamAt is the upstream's clock at the answer, from its Date
	// header; zero without one.
	upstreamAt time.Time
}

// send waits for the budget, sends one request and classifies its answer.
// tok is empty for the login.
func (c *Client) send(ctx context.Context, endpoint string, body any, tok string) (answer, error) {
	prio := priorityOf(ctx)
	start, err := c.budget.wait(ctx, prio, c.share)
	if err != nil {
		return answer{}, fmt.Errorf("opendata: %s: waiting for the rate budget: %w", endpoint, err)
	}
	if err := c.reserveShared(ctx); err != nil {
		return answer{}, fmt.Errorf("opendata: %s: waiting for the rate budget: %w", endpoint, err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := c.http.R().
		SetContext(rctx).
		SetHeader("Content-Type", "application/json").
		SetBody(body)
	if tok != "" {
		if c.authScheme != "" {
			req.SetHeader("Authorization", c.authScheme+" "+tok)
		} else {
			req.SetHeader("Authorization", tok)
		}
	}
	began, sent := time.Now(), c.clock.Now()
	resp, err := req.Post(c.endpointURL(endpoint))
	var raw []byte
	if err == nil {
		raw, err = readBody(resp)
	}
	elapsed := time.Since(began)
	ans, aerr := c.classify(endpoint, resp, raw, err)
	if resp != nil && resp.RawResponse != nil {
		c.mu.Lock()
		ans.upstreamAt = c.upClock.observe(resp.Header(), sent, c.clock.Now())
		offset, ok := c.upClock.offset()
		c.mu.Unlock()
		if ok {
			c.metrics.clockOffset(offset)
		}
	}
	outcome := "ok"
	if aerr != nil {
		outcome = aerr.Kind.String()
		if ctx.Err() != nil {
			outcome = "canceled"
		}
	}
	c.metrics.request(endpoint, outcome)
	c.log.Debug("upstream request", "endpoint", endpoint, "priority", prio.String(),
		"outcome", outcome, "status", ans.status, "duration", elapsed)
	if aerr == nil {
		return ans, nil
	}
	if aerr.Kind == KindRateLimited {
		halved := c.budget.signal(start, aerr.RetryAfter)
		c.metrics.rateLimitSignal()
		c.log.Warn("upstream rate limit signal", "endpoint", endpoint, "code", aerr.Code,
			"status", aerr.HTTPStatus, "retry_after", aerr.RetryAfter, "halved", halved, "limit", c.budget.Limit())
	}
	return ans, aerr
}

// readBody reads and closes the body of resp as a stream, with every JSON
// string bounded to MaxStringBytes: an answer of any size costs memory in
// proportion to its records. A body still over maxBody after that is an
// error.
func readBody(resp *resty.Response) ([]byte, error) {
	raw := resp.RawBody()
	if raw == nil {
		return nil, nil
	}
	defer raw.Close()
	body, err := io.ReadAll(io.LimitReader(boundStrings(raw, MaxStringBytes), maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("the answer is over %d MiB even with every string cut to %d KiB", maxBody>>20, MaxStringBytes>>10)
	}
	return body, nil
}

// reserveShared waits, after the local budget granted a start, until the
// budget shared with other processes has room too, and records the start
// there. A shared budget that cannot be used is warned about once, not
// waited on: polling goes on within the local budget.
func (c *Client) reserveShared(ctx context.Context) error {
	if c.shared == nil {
		return nil
	}
	for {
		now := c.clock.Now()
		wait, err := c.shared.Reserve(ctx, now, c.budget.Limit(), c.budget.bid(c.share, now))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !c.sharedFailing.Swap(true) {
				c.log.Warn("cannot share the request budget with other processes; together they may exceed the upstream's rate limit",
					"budget", fmt.Sprint(c.shared), "err", err)
			}
			return nil
		}
		if c.sharedFailing.Swap(false) {
			c.log.Info("the request budget is shared with other processes again", "budget", fmt.Sprint(c.shared))
		}
		if wait <= 0 {
			return nil
		}
		c.log.Debug("the shared request budget is full; waiting", "budget", fmt.Sprint(c.shared), "wait", wait)
		t := c.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (c *Client) endpointURL(endpoint string) string {
	if endpoint == endpointLogin {
		return c.baseURL + apiPrefix + "common/login"
	}
	return c.baseURL + apiPrefix + "service/" + endpoint
}

// classify turns a response, or the failure to get one, into an answer or an
// *Error (docs/design.md §3).
func (c *Client) classify(endpoint string, resp *resty.Response, body []byte, err error) (answer, *Error) {
	if err != nil {
		return answer{}, &Error{Endpoint: endpoint, Kind: KindTransient, Err: c.redactErr(err)}
	}
	ans := answer{status: resp.StatusCode(), header: resp.Header()}
	if ans.status >= 300 && ans.status <= 399 {
		host := "(no Location)"
		if loc, err := url.Parse(resp.Header().Get("Location")); err == nil && loc.Host != "" {
			host = loc.Host
		}
		return ans, &Error{Endpoint: endpoint, HTTPStatus: ans.status, Kind: KindBadRequest,
			Err: fmt.Errorf("redirect refused: HTTP %d to %s; relay never follows a redirect, so that the app secret "+
				"and token go only to RELAY_BASE_URL: set RELAY_BASE_URL to the address the upstream redirects to", ans.status, host)}
	}
	env, envErr := decodeEnvelope(body)
	e := &Error{Endpoint: endpoint, HTTPStatus: ans.status}
	if envErr == nil {
		e.Code = env.code
		e.Description = c.redact(env.description)
		e.ErrorMsg = c.redact(env.errorMsg)
		e.ErrorKey = c.redact(env.errorKey)
	}
	switch kind, known := kindOfStatus(ans.status); {
	case ans.status >= 200 && ans.status <= 299:
		if envErr != nil {
			e.Kind, e.Err = KindTransient, envErr
			return ans, e
		}
		if env.code == codeSuccess {
			ans.data = env.data
			return ans, nil
		}
		e.Kind = kindOfCode(env.code)
	case known:
		e.Kind = kind
	case envErr == nil && env.code != codeSuccess:
		e.Kind = kindOfCode(env.code)
	default:
		e.Kind = KindBadRequest
	}
	if e.Kind == KindRateLimited {
		e.RetryAfter = parseRetryAfter(resp.Header().Get("Retry-After"), c.clock.Now())
	}
	return ans, e
}

// redact replaces the app secret and the tokens in s.
func (c *Client) redact(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, secret := range c.secrets {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// redactErr returns err, or a copy of its text without secrets when it
// contains one. The context errors stay matchable with errors.Is.
func (c *Client) redactErr(err error) error {
	msg := err.Error()
	clean := c.redact(msg)
	if clean == msg {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", clean, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", clean, context.Canceled)
	}
	return errors.New(clean)
}

// restyLogger passes resty's own messages to the client's logger.
type restyLogger struct{ c *Client }

func (l restyLogger) Errorf(format string, v ...any) {
	l.c.log.Error("resty: " + l.c.redact(fmt.Sprintf(format, v...)))
}

func (l restyLogger) Warnf(format string, v ...any) {
	l.c.log.Warn("resty: " + l.c.redact(fmt.Sprintf(format, v...)))
}

func (l restyLogger) Debugf(format string, v ...any) {
	l.c.log.Debug("resty: " + l.c.redact(fmt.Sprintf(format, v...)))
}
