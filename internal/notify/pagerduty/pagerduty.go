// Package pagerduty is the pagerduty sink type: it sends each alarm to a
// PagerDuty service through the Events API v2, a trigger when the alarm
// starts and a resolve when it ends or is withdrawn, both keyed by the
// alarm's originId, so that one alarm is one PagerDuty alert.
package pagerduty

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// DefaultURL is the Events API v2 endpoint.
const DefaultURL = "https://events.pagerduty.com/v2/enqueue"

// The Events API v2's bounds and limits, as PagerDuty documents them
// (developer.pagerduty.com, "Send an Alert Event" and "Events API Rate
// Limits").
const (
	// PerWindow and Window are the pace the sink keeps per routing key:
	// PagerDuty takes "approximately 120 calls/minute per integration key",
	// counted over the 60 s before each call; a second of margin.
	PerWindow = 120
	Window    = 61 * time.Second
	// RateLimitWait is how long the sink waits after a 429 that names no
	// Retry-After (PagerDuty sends none that it documents): its rate-limit
	// page suggests retrying 30 seconds apart.
	RateLimitWait = 30 * time.Second
	// MaxSummary bounds payload.summary, in characters.
	MaxSummary = 1024
	// MaxDedupKey bounds dedup_key, in characters.
	MaxDedupKey = 255
	// RoutingKeyLen is the length of an integration (routing) key.
	RoutingKeyLen = 32
	// Client names relay in the alert ("client").
	Client = "relay"
)

// vendor is what a pagerduty sink is of its own: the Events API v2, paced
// per routing key, each event named by its action and dedup_key, its answer
// a status.
//
// The start of an alarm is a trigger, its end or its withdrawal (invalid) a
// resolve, both with the alarm's originId as dedup_key, so PagerDuty keeps
// one alert per alarm and resolves it when the alarm ends. A trigger after
// the resolve of the same key opens a new alert, as PagerDuty documents.
// The sink keeps no memory: the key is the alarm's own.
//
// Events wait for the routing key's pace (120 in any 61 s). A 429 is
// retried after its Retry-After, or RateLimitWait, and every sink of the
// routing key holds back that long; a 5xx or a network failure is retried.
// A 400 (PagerDuty refused the event, naming why) dead-letters it at once.
var vendor = robot.Vendor{
	Name: "pagerduty",
	Doc:  "sends a PagerDuty Events API v2 trigger when an alarm starts and a resolve when it ends, keyed by its originId, at most 120 a minute per routing key",
	Options: []sinktype.Option{
		{Key: "routing_key_env", Doc: "variable holding the 32-character Integration Key of the service's Events API v2 integration (required; a secret)"},
		{Key: "url", Doc: "the Events API v2 endpoint (default " + DefaultURL + ")"},
		{Key: "title", Doc: "Go template of the alert's summary over the fields of subjects, as plain text cut to 1024 characters (default: the level, the alarm and the place); " +
			"there is no text template: custom_details carries the event's data"},
		{Key: "api_token_env", Doc: "variable holding a REST API key (read-only is enough) with which relay reads back, every 30 s, the incidents people acknowledged in PagerDuty " +
			"and acknowledges their alarms in relay too (ack_by names them pagerduty:<user id>); unset, relay reads nothing (a secret)"},
		{Key: "api_url", Doc: "the REST API that api_token_env reads (default " + DefaultAPIURL + ")"},
	},
	Decode:  decode,
	Windows: []notify.Window{{N: PerWindow, Per: Window}},
	Key: func(_, routingKey string) (string, error) {
		if routingKey == "" {
			return "", errors.New("no routing key")
		}
		return routingKey, nil
	},
	What: func(ev *event.Event) string {
		return fmt.Sprintf("%s of %s (dedup_key %s)", Action(ev), ev.ID, DedupKey(ev.Data.OriginID))
	},
	Answer:  accepted,
	Refused: refused,
}

// Type is the pagerduty sink type: the robot base's, whose sinks also
// acknowledge alerts and, with api_token_env, read acknowledgements back.
var Type = func() sinktype.Type {
	t := vendor.Type()
	robotDecode := t.Decode
	t.Decode = func(d *sinktype.Decoder) sinktype.Config { return decodeAPI(d, robotDecode) }
	return t
}()

// answer is the JSON answer of the Events API v2: status "success" and the
// dedup_key for a 202; status "invalid event", a message and the errors
// for a 400.
type answer struct {
	Status   string   `json:"status"`
	Message  string   `json:"message"`
	DedupKey string   `json:"dedup_key"`
	Errors   []string `json:"errors"`
}

// accepted reads the answer to a 2xx: PagerDuty's "success", or an answer
// that is not PagerDuty's.
func accepted(a *robot.Attempt, got []byte) (notify.Result, error) {
	var ans answer
	if json.Unmarshal(got, &ans) != nil || ans.Status != "success" {
		return notify.Result{}, fmt.Errorf("%s: the answer is not PagerDuty's (no \"status\":\"success\"): %s: check url",
			a.What, sinktype.Truncate(sinktype.OneLine(a.CleanText(string(got))), 200))
	}
	return notify.Result{}, nil
}

// refused words a failed post: a 400 with PagerDuty's own reasons and what
// to fix, a 429 with the wait every sink of the routing key keeps.
func refused(a *robot.Attempt, se *notify.StatusError, res notify.Result, err error) (notify.Result, error) {
	var ans answer
	_ = json.Unmarshal(se.Answer, &ans)
	said := strings.TrimSpace(strings.Join(append([]string{ans.Status, ans.Message}, ans.Errors...), ": "))
	said = strings.Trim(said, ": ")
	switch {
	case se.Status == http.StatusTooManyRequests:
		wait := res.RetryAfter
		if wait <= 0 {
			wait = RateLimitWait
		}
		a.Block(wait)
		return notify.Result{Retry: true, RetryAfter: wait}, fmt.Errorf(
			"%s: PagerDuty answered HTTP 429 (%s): over about %d events a minute for this routing key (does another sender use it?); every sink of this routing key waits %s",
			a.What, orSnippet(a, said, se.Answer), PerWindow, wait)
	case se.Status == http.StatusBadRequest:
		return notify.Result{}, fmt.Errorf("%s: PagerDuty refused the event, HTTP 400 (%s): %s",
			a.What, orSnippet(a, said, se.Answer), hint(ans.Errors))
	}
	return res, err
}

// hint says what to fix for a 400, from PagerDuty's errors.
func hint(errs []string) string {
	all := strings.ToLower(strings.Join(errs, " "))
	switch {
	case strings.Contains(all, "routing") || strings.Contains(all, "integration key") || strings.Contains(all, "service key"):
		return "check that routing_key_env holds the 32-character Integration Key of an Events API v2 integration of the service"
	case strings.Contains(all, "summary"):
		return "check the title template, which writes the summary"
	}
	return "the event is not retried; PagerDuty's errors say what it refused"
}

// orSnippet returns said, or the start of the answer when PagerDuty's JSON
// said nothing, cleaned of the sink's secrets before it is cut.
func orSnippet(a *robot.Attempt, said string, answer []byte) string {
	if said != "" {
		return sinktype.Truncate(a.CleanText(said), 300)
	}
	if s := sinktype.OneLine(a.CleanText(string(answer))); s != "" {
		return sinktype.Truncate(s, 200)
	}
	return "empty answer"
}

// Action returns the event_action of ev: trigger for a start, acknowledge
// for an ack, resolve for an end or an invalid. An unack has none: the
// Events API v2 cannot take an acknowledgement back, and the sink sends
// nothing for it.
func Action(ev *event.Event) string {
	switch ev.Data.Transition {
	case event.Start:
		return "trigger"
	case event.Ack:
		return "acknowledge"
	}
	return "resolve"
}

// DedupKey returns the dedup_key of the alarm originID: the originId
// itself, or, for one over MaxDedupKey characters, its start and the hex
// SHA-256 of the whole, so that its trigger and resolve still meet.
func DedupKey(originID string) string {
	if len(originID) <= MaxDedupKey {
		return originID
	}
	sum := sha256.Sum256([]byte(originID))
	h := hex.EncodeToString(sum[:])
	return sinktype.Truncate(originID, MaxDedupKey-len(h)-1) + "~" + h
}

// Severity returns the PagerDuty severity of a level: urgent critical,
// severe error, major warning, minor (and any other) info.
func Severity(level int) string {
	return sinktype.ByLevel(level, "critical", "error", "warning", "info")
}

// eventBody is the JSON body of an Events API v2 alert event.
type eventBody struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"`
	DedupKey    string   `json:"dedup_key"`
	Payload     *payload `json:"payload,omitempty"`
	Client      string   `json:"client,omitempty"`
}

type payload struct {
	Summary       string     `json:"summary"`
	Source        string     `json:"source"`
	Severity      string     `json:"severity"`
	Timestamp     string     `json:"timestamp,omitempty"`
	Component     string     `json:"component,omitempty"`
	Group         string     `json:"group,omitempty"`
	Class         string     `json:"class,omitempty"`
	CustomDetails event.Data `json:"custom_details"`
}

// events are the payloads of a pagerduty sink, whose endpoint and routing
// key robot.Options hold as its URL and secret.
type events struct{}

// decode reads the endpoint, by default the Events API v2's, and the
// variable holding the routing key, which has 32 characters.
func decode(d *sinktype.Decoder) (robot.Options, robot.Payload) {
	o := robot.Options{URL: DefaultURL}
	if d.Has("url") {
		o.URL = d.URL("url")
	}
	if d.Missing("routing_key_env", "a pagerduty sink needs routing_key_env, the variable holding the Integration Key of an Events API v2 integration") {
		o.SecretEnv, o.Secret = d.Env("routing_key_env")
		if o.Secret != "" && !d.Placeholder(o.Secret) && len(o.Secret) != RoutingKeyLen {
			d.Errorf("routing_key_env", "environment variable %s holds %d characters, not the %d of an Integration Key: copy it from the service's Integrations tab, Events API v2",
				o.SecretEnv, len(o.Secret), RoutingKeyLen)
			o.Secret = ""
		}
	}
	// The summary is plain text: nothing to escape.
	o.Message = d.Message(nil)
	return o, events{}
}

// Summary names the routing key's variable.
func (events) Summary(o *robot.Options) []string { return []string{"routing_key_env: " + o.SecretEnv} }

// Body is the package's Body with the sink's title template and routing
// key (its variable's name, in a rendering).
func (events) Body(ev *event.Event, o *robot.Options) ([]byte, error) {
	return Body(ev, o.Message, o.Secret)
}

// Body returns the JSON body of the event PagerDuty gets for ev, with
// routingKey. A start is a trigger whose payload says what the alert shows:
// summary (the title template, or the headline, cut to MaxSummary), source
// (the device), severity (from the level), timestamp (when the alarm
// occurred), component (the station), group (the system), class (the
// device type) and custom_details (the event's data, the upstream record
// included). An ack is an acknowledge, an end or invalid a resolve, which
// PagerDuty reads only the key of. The error, when not nil, says why the title template failed
// on ev: the body then holds the default summary. Send and Render both use
// it, so that relay route --render shows exactly what is sent.
func Body(ev *event.Event, m *sinktype.Message, routingKey string) ([]byte, error) {
	b := eventBody{RoutingKey: routingKey, EventAction: Action(ev), DedupKey: DedupKey(ev.Data.OriginID)}
	// An acknowledge and a resolve name the alert by its key alone.
	var tmplErr error
	if ev.Data.Transition == event.Start {
		def := sinktype.Headline(ev)
		var text sinktype.Text
		text, tmplErr = m.Render(ev, sinktype.Text{Title: def})
		summary := sinktype.OneLine(text.Title)
		if summary == "" {
			summary = def
		}
		b.Client = Client
		b.Payload = &payload{
			Summary:       truncateChars(summary, MaxSummary),
			Source:        sinktype.FirstNonEmpty(sinktype.Device(ev), sinktype.Station(ev), "relay"),
			Severity:      Severity(ev.Data.Level),
			Timestamp:     ev.Data.OccurredAt,
			Component:     sinktype.Station(ev),
			Group:         ev.Data.SystemID,
			Class:         ev.Data.DeviceTemplateCode,
			CustomDetails: ev.Data,
		}
	}
	out, err := sinktype.JSON(b)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	return out, tmplErr
}

// truncateChars cuts s to at most n characters, ending it with "…" when it
// was cut.
func truncateChars(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
