package pagerduty

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// config is the robot base's Config of a pagerduty sink, with the REST API
// it reads acknowledgements back from when api_token_env is set.
type config struct {
	sinktype.Config
	// tokenEnv names the variable token came from; "" reads nothing.
	tokenEnv, token string
	apiURL          string
}

// decodeAPI reads api_token_env and api_url, then the robot base's options
// with robotDecode.
func decodeAPI(d *sinktype.Decoder, robotDecode func(*sinktype.Decoder) sinktype.Config) sinktype.Config {
	c := &config{apiURL: DefaultAPIURL}
	c.tokenEnv, c.token = d.Env("api_token_env")
	if d.Has("api_url") {
		if !d.Has("api_token_env") {
			d.Errorf("api_url", "api_url says where api_token_env reads acknowledgements: set api_token_env too, or remove api_url")
		}
		if u := d.URL("api_url"); u != "" {
			c.apiURL = u
		}
	}
	inner := robotDecode(d)
	if inner == nil {
		return nil
	}
	c.Config = inner
	return c
}

// Summary adds the API key's variable to the robot base's summary.
func (c *config) Summary() []string {
	out := c.Config.Summary()
	if c.tokenEnv != "" {
		out = append(out, "api_token_env: "+c.tokenEnv+" (reads acknowledgements every "+PollEvery.String()+")")
	}
	return out
}

// AddSecrets adds the API key to the robot base's secrets.
func (c *config) AddSecrets(set *redact.Set) {
	c.Config.AddSecrets(set)
	set.Add(c.token)
}

// Build makes the robot base's sink, which this package's Sink wraps.
func (c *config) Build(ctx context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	inner, err := c.Config.Build(ctx, name, deps)
	if err != nil {
		return nil, err
	}
	rs, ok := inner.(*robot.Sink)
	if !ok {
		return nil, fmt.Errorf("pagerduty sink %q: the robot base built a %T", name, inner)
	}
	s := &Sink{Sink: rs}
	if c.token != "" {
		deps = deps.Defaults()
		s.reader = &ackReader{sink: name, base: c.apiURL, token: c.token, http: notify.NoRedirects(deps.HTTP),
			clock: deps.Clock, log: deps.Logger, secrets: redact.New(c.token), handed: map[string]bool{}}
	}
	return s, nil
}

// Probe dials the Events API's host and, with api_token_env, reads one
// acknowledged incident with the API key, which proves the key.
func (c *config) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	line, err := c.Config.Probe(ctx, deps)
	if err != nil || c.token == "" {
		return line, err
	}
	deps = deps.Defaults()
	r := &ackReader{sink: "probe", base: c.apiURL, token: c.token, http: notify.NoRedirects(deps.HTTP), clock: deps.Clock,
		log: deps.Logger, secrets: redact.New(c.token)}
	var ans struct {
		Incidents []incident `json:"incidents"`
	}
	q := url.Values{"statuses[]": {"acknowledged"}, "limit": {strconv.Itoa(1)}}
	if _, err := r.get(ctx, "/incidents", q, &ans); err != nil {
		return "", err
	}
	return line + "; the API key reads incidents", nil
}

// Render is the robot base's, but for an unack, which sends nothing.
func (c *config) Render(ev *event.Event) ([]sinktype.Request, error) {
	if ev.Data.Transition == event.Unack {
		return nil, nil
	}
	return c.Config.Render(ev)
}

// Sink sends a PagerDuty alert's events (the robot base's sink), including
// the acknowledgements people make in relay's other channels, and, with
// api_token_env, reads the acknowledgements people make in PagerDuty back
// into relay (a notify.Listener).
type Sink struct {
	*robot.Sink
	reader *ackReader
}

// CarriesAcks reports that the sink acknowledges the alert of an alarm
// someone acknowledged elsewhere (an acknowledge event with its dedup_key);
// an unack sends nothing, since the Events API v2 has no way to take an
// acknowledgement back.
func (s *Sink) CarriesAcks() bool { return true }

// Send makes one attempt at d: a trigger, an acknowledge or a resolve; an
// unack succeeds without a request. PagerDuty keys the alert by the alarm's
// own id, so an ack needs no memory of the start: PagerDuty drops an
// acknowledge of a key it has no open alert for.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("pagerduty sink %q: %w", s.Name(), err)
	}
	if ev.Data.Transition == event.Unack {
		return notify.Result{}, nil
	}
	return s.Sink.Send(ctx, d)
}

// ListenKey names the API key the sink reads acknowledgements with (a hash
// of it), "" without api_token_env: sinks of one key share one poller.
func (s *Sink) ListenKey() string {
	if s.reader == nil {
		return ""
	}
	return listenKey(s.reader.token)
}

// Listen reads acknowledged incidents every PollEvery until ctx ends (a
// 429 waits what PagerDuty asks; failures back off up to 5 minutes) and
// hands each acknowledgement by a PagerDuty user to acts, once per
// process: Action{Kind: Acknowledge, Alarms: the incident's dedup_keys,
// Actor{Via: "pagerduty", ID: the user's id, Name: their name}, Ref: the
// incident's id "@" the acknowledgement's time}. It returns nil when ctx
// ends, and an error when PagerDuty refuses the API key.
func (s *Sink) Listen(ctx context.Context, acts notify.Actions) error {
	if s.reader == nil {
		return errors.New("pagerduty sink " + strconv.Quote(s.Name()) + ": no api_token_env to read acknowledgements with")
	}
	return s.reader.listen(ctx, acts)
}
