package pagerduty

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// PagerDuty's REST API v2, as its OpenAPI document gives it
// (github.com/PagerDuty/api-schema, reference/REST/openapiv3.json): the
// server, the security scheme "api_key" (the Authorization header "Token
// token=<API_KEY>"), the Accept header that versions the API, and the page
// size of GET /incidents ("Maximum of 100").
const (
	DefaultAPIURL = "https://api.pagerduty.com"
	APIAccept     = "application/vnd.pagerduty+json;version=2"
	apiTokenAuth  = "Token token="
	apiPageLimit  = 100
)

// How the sink reads acknowledgements back.
const (
	// PollEvery is how often the sink asks PagerDuty for acknowledged
	// incidents: two requests a minute (more for many pages) of the 960
	// a minute PagerDuty allows a token.
	PollEvery = 30 * time.Second
	// apiRateLimitWait is the wait after a 429 that says none in
	// ratelimit-reset or Retry-After.
	apiRateLimitWait = time.Minute
	// maxPollBackoff caps the wait after failed polls.
	maxPollBackoff = 5 * time.Minute
	// apiTimeout bounds one request.
	apiTimeout = 30 * time.Second
	// maxAPIAnswer bounds the bytes of an answer read: a page of 100
	// incidents is some hundred KiB.
	maxAPIAnswer = 8 << 20
)

// errTokenRefused is a 401 or 403: polling again cannot cure it.
var errTokenRefused = errors.New("PagerDuty refused the API token")

// ackReader reads, through PagerDuty's REST API, the acknowledgements
// people make in PagerDuty (its app, a phone call, a text) of the alerts
// the sink triggered, and hands each to relay as an Acknowledge: outbound
// only, by polling GET /incidents?statuses[]=acknowledged.
//
// An incident names the alarms it stands for by its incident_key, the
// dedup_key of the alert that opened it, and by the alert_key of each of
// its alerts; PagerDuty's reference says incidents with child alerts may
// have no incident_key, and alert grouping puts several alerts in one
// incident. So the reader lists the alerts of an incident whose
// incident_key is empty or that holds more than one alert.
//
// Only acknowledgements by a user are handed over: an acknowledgement by
// a service is an acknowledge event, such as the one this sink sends when
// someone acknowledged in another chat, and handing it back would
// acknowledge the alarm again after someone took that back.
type ackReader struct {
	sink    string
	base    string
	token   string
	http    *http.Client
	clock   clock.Clock
	log     *slog.Logger
	secrets *redact.Set
	// handed are the acknowledgements (incident id and time) handed over
	// and still acknowledged at the last poll.
	handed map[string]bool
}

// listenKey is the key of the sinks that read acknowledgements with token:
// one poller per token.
func listenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "pagerduty-api:" + hex.EncodeToString(sum[:6])
}

// listen polls until ctx ends, handing acknowledgements to acts; it returns
// nil when ctx ends, or errTokenRefused wrapped.
func (r *ackReader) listen(ctx context.Context, acts notify.Actions) error {
	failures := 0
	for {
		wait, err := r.poll(ctx, acts)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, errTokenRefused):
			return err
		case err != nil:
			failures++
			wait = max(wait, backoff(failures))
			r.log.Warn("reading PagerDuty acknowledgements failed", "sink", r.sink, "err", err.Error(), "retry_in", wait.String())
		default:
			failures = 0
			wait = max(wait, PollEvery)
		}
		t := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// backoff is the wait after n failed polls in a row: PollEvery doubling up
// to maxPollBackoff, with a fifth of jitter.
func backoff(n int) time.Duration {
	d := maxPollBackoff
	if n < 8 {
		d = min(PollEvery<<(n-1), maxPollBackoff)
	}
	return d - time.Duration(rand.Int64N(int64(d/5)+1))
}

// incident is what the reader reads of an incident.
type incident struct {
	ID          string `json:"id"`
	IncidentKey string `json:"incident_key"`
	AlertCounts struct {
		All int `json:"all"`
	} `json:"alert_counts"`
	Acknowledgements []struct {
		At           string `json:"at"`
		Acknowledger struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Summary string `json:"summary"`
		} `json:"acknowledger"`
	} `json:"acknowledgements"`
}

// page is the pagination of a list answer.
type page struct {
	Limit  int  `json:"limit"`
	Offset int  `json:"offset"`
	More   bool `json:"more"`
}

// poll reads every acknowledged incident, page by page, and hands over the
// acknowledgements by users it has not handed over yet. It returns the
// wait PagerDuty asked for, if it did.
func (r *ackReader) poll(ctx context.Context, acts notify.Actions) (time.Duration, error) {
	seen := map[string]bool{}
	for offset := 0; ; {
		var ans struct {
			page
			Incidents []incident `json:"incidents"`
		}
		q := url.Values{"statuses[]": {"acknowledged"}, "date_range": {"all"},
			"limit": {strconv.Itoa(apiPageLimit)}, "offset": {strconv.Itoa(offset)}}
		if wait, err := r.get(ctx, "/incidents", q, &ans); err != nil {
			return wait, err
		}
		for _, in := range ans.Incidents {
			if err := r.hand(ctx, acts, in, seen); err != nil {
				return 0, err
			}
		}
		if !ans.More || len(ans.Incidents) == 0 {
			break
		}
		offset += len(ans.Incidents)
	}
	// What is no longer acknowledged is forgotten: the memory stays as
	// small as what PagerDuty holds acknowledged.
	r.handed = seen
	return 0, nil
}

// hand hands the acknowledgements of in by users to acts, once each.
func (r *ackReader) hand(ctx context.Context, acts notify.Actions, in incident, seen map[string]bool) error {
	var keys []string
	for _, a := range in.Acknowledgements {
		if t := a.Acknowledger.Type; t != "user_reference" && t != "user" {
			continue
		}
		ref := in.ID + "@" + a.At
		seen[ref] = true
		if r.handed[ref] {
			continue
		}
		if keys == nil {
			var err error
			if keys, err = r.alarms(ctx, in); err != nil {
				delete(seen, ref)
				return err
			}
		}
		if len(keys) == 0 {
			r.handed[ref] = true
			continue
		}
		res, err := acts.Act(ctx, notify.Action{
			Kind: notify.Acknowledge, Sink: r.sink, Alarms: keys, Ref: ref,
			Actor: notify.Actor{Via: "pagerduty", ID: a.Acknowledger.ID, Name: a.Acknowledger.Summary},
		})
		if err != nil {
			delete(seen, ref)
			return fmt.Errorf("pagerduty sink %q: handing over the acknowledgement of incident %s: %w", r.sink, in.ID, err)
		}
		r.handed[ref] = true
		r.log.Info("PagerDuty acknowledgement handed over", "sink", r.sink, "incident", in.ID, "alarms", strings.Join(keys, ","),
			"by", a.Acknowledger.ID, "applied", len(res.Applied), "result", res.Text)
	}
	return nil
}

// alarms returns the dedup_keys in stands for: its incident_key, and the
// alert_key of each of its alerts when it has no incident_key or more than
// one alert.
func (r *ackReader) alarms(ctx context.Context, in incident) ([]string, error) {
	keys := []string{}
	if in.IncidentKey != "" {
		keys = append(keys, in.IncidentKey)
		if in.AlertCounts.All <= 1 {
			return keys, nil
		}
	}
	for offset := 0; ; {
		var ans struct {
			page
			Alerts []struct {
				AlertKey string `json:"alert_key"`
			} `json:"alerts"`
		}
		q := url.Values{"limit": {strconv.Itoa(apiPageLimit)}, "offset": {strconv.Itoa(offset)}}
		if _, err := r.get(ctx, "/incidents/"+url.PathEscape(in.ID)+"/alerts", q, &ans); err != nil {
			return nil, err
		}
		for _, a := range ans.Alerts {
			if a.AlertKey != "" && !slices.Contains(keys, a.AlertKey) {
				keys = append(keys, a.AlertKey)
			}
		}
		if !ans.More || len(ans.Alerts) == 0 {
			return keys, nil
		}
		offset += len(ans.Alerts)
	}
}

// get reads path with q from the REST API into into. Its error says what
// was asked and what PagerDuty answered, never the token; after a 429 it
// returns the wait PagerDuty asked for.
func (r *ackReader) get(ctx context.Context, path string, q url.Values, into any) (time.Duration, error) {
	what := fmt.Sprintf("pagerduty sink %q: reading acknowledgements: GET %s", r.sink, path)
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", apiTokenAuth+r.token)
	req.Header.Set("Accept", APIAccept)
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, r.secrets.Error(fmt.Errorf("%s: %s", what, requestError(err)))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAPIAnswer))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		if err := json.Unmarshal(body, into); err != nil {
			return 0, fmt.Errorf("%s: the answer is not PagerDuty's JSON (%v): check api_url", what, err)
		}
		return 0, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return 0, r.secrets.Error(fmt.Errorf("%s: HTTP %d (%s): %w: check that api_token_env holds a REST API key (Integrations, API Access Keys; read-only is enough) that can see the service's incidents",
			what, code, apiMessage(body), errTokenRefused))
	case code == http.StatusTooManyRequests:
		wait := secondsHeader(resp.Header.Get("ratelimit-reset"))
		if wait == 0 {
			wait = secondsHeader(resp.Header.Get("Retry-After"))
		}
		if wait == 0 {
			wait = apiRateLimitWait
		}
		return wait, r.secrets.Error(fmt.Errorf("%s: HTTP 429 (%s): over the token's rate limit (does another program use it?); waiting %s", what, apiMessage(body), wait))
	}
	return 0, r.secrets.Error(fmt.Errorf("%s: HTTP %d (%s)", what, code, apiMessage(body)))
}

// apiMessage is what a REST error answer says: {"error":{"message",
// "code","errors"}}, or the start of the answer.
func apiMessage(body []byte) string {
	var ans struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Errors  []string `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &ans) == nil && ans.Error.Message != "" {
		msg := ans.Error.Message
		if len(ans.Error.Errors) > 0 {
			msg += ": " + strings.Join(ans.Error.Errors, "; ")
		}
		return sinktype.Truncate(fmt.Sprintf("%s, code %d", msg, ans.Error.Code), 300)
	}
	if s := sinktype.OneLine(string(body)); s != "" {
		return sinktype.Truncate(s, 200)
	}
	return "empty answer"
}

// secondsHeader reads a header holding a number of seconds; zero when it
// holds none.
func secondsHeader(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// requestError words a failed request without its URL.
func requestError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}
