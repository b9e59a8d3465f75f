package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/relay-energy/relay/internal/redact"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// Keys of the Slack sink's memory of an alarm.
const (
	// MemoryTS is the ts of the start message, the thread of the end.
	MemoryTS = "ts"
	// MemoryChannel is the id of the channel the start was posted in.
	MemoryChannel = "channel"
)

// Colours of the Slack side bar.
const (
	colorUrgent    = "#d40e0d"
	colorSevere    = "#ff8c00"
	colorMajor     = "#f2c744"
	colorMinor     = "#2f7bed"
	colorResolved  = "#2eb886"
	colorCancelled = "#8d8d8d"
)

// DefaultSlackAPIURL is Slack's Web API.
const DefaultSlackAPIURL = "https://slack.com/api/"

// SlackConfig configures a Slack sink: a bot token and a channel (threads
// and in-place updates), or an incoming webhook URL (plain messages).
type SlackConfig struct {
	// Name is the sink's name from the rules file.
	Name string
	// Channel is the channel id (or name) the bot posts to.
	Channel string
	// Token is the bot token (xoxb-...). It never appears in errors or logs.
	Token string
	// APIURL is the Web API base URL (default DefaultSlackAPIURL).
	APIURL string
	// WebhookURL selects incoming-webhook mode when set. It is a secret:
	// it never appears in errors or logs.
	WebhookURL string
	// HTTPClient makes the requests (default a new client).
	HTTPClient *http.Client
	// Clock paces the messages (default the real clock).
	Clock clock.Clock
	// Pacer, when set, spaces this sink's messages together with those of
	// every other sink given the same Pacer: Slack's limit is per channel,
	// so sinks posting to one channel share one. Default: a Pacer of this
	// sink's own, of Pace.
	Pacer *Pacer
	// Pace is the least time between two messages of this sink, Slack's
	// limit for one channel (default 1s).
	Pace time.Duration
	// Timeout bounds one API request (default 10s).
	Timeout time.Duration
	// Logger receives a line when a start message cannot be updated
	// (default slog.Default()).
	Logger *slog.Logger
}

// SlackSink posts alarms to Slack. With a bot token, a start is a message
// with a side bar coloured by level; its end (or invalid) is a reply in the
// start's thread, and the start message is updated in place to show it
// resolved (or cancelled) and for how long. Without a stored thread, the end
// is posted on its own. With an incoming webhook, every event is a message
// of its own.
type SlackSink struct {
	cfg SlackConfig
	api *slack.Client
	log *slog.Logger
	// secrets are the token and the incoming webhook's URL, cleaned from
	// every error Send returns.
	secrets *redact.Set
	// hooks posts to the incoming webhook, never following a redirect.
	hooks *http.Client

	pacer *Pacer
}

// Pacer spaces messages to one Slack channel: at most one per interval. It
// is safe for concurrent use.
type Pacer struct {
	every time.Duration
	clock clock.Clock

	mu   sync.Mutex
	next time.Time // earliest time of the next message
}

// NewPacer returns a Pacer allowing one message per every on clk.
func NewPacer(every time.Duration, clk clock.Clock) *Pacer {
	return &Pacer{every: every, clock: clk}
}

// Wait blocks until the next message may be posted, or ctx ends.
func (p *Pacer) Wait(ctx context.Context) error {
	p.mu.Lock()
	now := p.clock.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	wait := at.Sub(now)
	if wait <= 0 {
		return nil
	}
	timer := p.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}

// NewSlack returns a Slack sink.
func NewSlack(cfg SlackConfig) (*SlackSink, error) {
	if cfg.Name == "" {
		return nil, errors.New("slack sink: no name")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Pace == 0 {
		cfg.Pace = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pace < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("slack sink %q: pace %s and timeout %s must not be negative", cfg.Name, cfg.Pace, cfg.Timeout)
	}
	s := &SlackSink{cfg: cfg, log: cfg.Logger, pacer: cfg.Pacer, secrets: redact.New(cfg.Token, cfg.WebhookURL)}
	s.secrets.AddURL(cfg.WebhookURL, true)
	s.hooks = NoRedirects(cfg.HTTPClient)
	if s.pacer == nil {
		s.pacer = NewPacer(cfg.Pace, cfg.Clock)
	}
	if cfg.WebhookURL != "" {
		if !strings.HasPrefix(cfg.WebhookURL, "https://") && !strings.HasPrefix(cfg.WebhookURL, "http://") {
			return nil, fmt.Errorf("slack sink %q: webhook_url is not an http(s) URL", cfg.Name)
		}
		return s, nil
	}
	if cfg.Channel == "" {
		return nil, fmt.Errorf("slack sink %q: no channel and no webhook_url", cfg.Name)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("slack sink %q: no bot token (RELAY_SLACK_TOKEN) to post to channel %s", cfg.Name, cfg.Channel)
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultSlackAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	s.api = slack.New(cfg.Token, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(cfg.HTTPClient))
	return s, nil
}

// Name returns the sink's name.
func (s *SlackSink) Name() string { return s.cfg.Name }

// Send posts one event. Rate limiting (HTTP 429) is retried after Slack's
// Retry-After; server errors and network failures are retried; errors such as
// invalid_auth or channel_not_found are not.
func (s *SlackSink) Send(ctx context.Context, d Delivery) (Result, error) {
	res, err := s.send(ctx, d)
	return res, s.secrets.Error(err)
}

func (s *SlackSink) send(ctx context.Context, d Delivery) (Result, error) {
	ev := d.Event
	if s.api == nil {
		return s.postWebhook(ctx, ev)
	}
	if ev.Data.Transition == event.Start {
		return s.postStart(ctx, ev)
	}
	ts, channel := d.Memory[MemoryTS], d.Memory[MemoryChannel]
	if ts == "" || channel == "" {
		return s.postAlone(ctx, ev)
	}
	return s.postInThread(ctx, ev, channel, ts)
}

func (s *SlackSink) postStart(ctx context.Context, ev *event.Event) (Result, error) {
	if err := s.pace(ctx); err != nil {
		return Result{Retry: true}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	channel, ts, err := s.api.PostMessageContext(rctx, s.cfg.Channel,
		slack.MsgOptionText(startText(ev), false),
		slack.MsgOptionAttachments(startAttachment(ev)))
	if err != nil {
		return s.fail("chat.postMessage", ev, err)
	}
	if channel == "" {
		channel = s.cfg.Channel
	}
	return Result{Memory: map[string]string{MemoryTS: ts, MemoryChannel: channel}}, nil
}

// postAlone posts an end whose start has no message to thread under.
func (s *SlackSink) postAlone(ctx context.Context, ev *event.Event) (Result, error) {
	if err := s.pace(ctx); err != nil {
		return Result{Retry: true}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, _, err := s.api.PostMessageContext(rctx, s.cfg.Channel,
		slack.MsgOptionText(endText(ev), false),
		slack.MsgOptionAttachments(endAttachment(ev)))
	if err != nil {
		return s.fail("chat.postMessage", ev, err)
	}
	return Result{}, nil
}

// postInThread updates the start message, then replies in its thread. The
// update goes first because repeating it is harmless: a retry after a failed
// reply does not post the reply twice. A start message that can no longer be
// edited does not hold the reply back.
func (s *SlackSink) postInThread(ctx context.Context, ev *event.Event, channel, ts string) (Result, error) {
	uctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	_, _, _, err := s.api.UpdateMessageContext(uctx, channel, ts,
		slack.MsgOptionText(endText(ev), false),
		slack.MsgOptionAttachments(endAttachment(ev)))
	cancel()
	if err != nil {
		if !messageGone(err) {
			return s.fail("chat.update", ev, err)
		}
		s.log.Warn("could not update the start message, replying in its thread only",
			"sink", s.cfg.Name, "event_id", ev.ID, "channel", channel, "ts", ts, "error", s.clean(err))
	}
	if err := s.pace(ctx); err != nil {
		return Result{Retry: true}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, _, err = s.api.PostMessageContext(rctx, channel,
		slack.MsgOptionText(replyText(ev), false),
		slack.MsgOptionTS(ts))
	if err != nil {
		return s.fail("chat.postMessage (thread reply)", ev, err)
	}
	return Result{}, nil
}

// webhookMessage is the payload of an incoming webhook.
type webhookMessage struct {
	Text        string             `json:"text"`
	Attachments []slack.Attachment `json:"attachments,omitempty"`
}

func (s *SlackSink) postWebhook(ctx context.Context, ev *event.Event) (Result, error) {
	msg := webhookMessage{Text: startText(ev), Attachments: []slack.Attachment{startAttachment(ev)}}
	if ev.Data.Transition != event.Start {
		msg = webhookMessage{Text: endText(ev), Attachments: []slack.Attachment{endAttachment(ev)}}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return Result{}, fmt.Errorf("slack sink %q: event %s: %w", s.cfg.Name, ev.ID, err)
	}
	if err := s.pace(ctx); err != nil {
		return Result{Retry: true}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("slack sink %q: incoming webhook: cannot build the request (check webhook_url)", s.cfg.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	_, res, err := Post(s.hooks, req, s.cfg.Clock.Now, fmt.Sprintf("slack sink %q: incoming webhook post of %s", s.cfg.Name, ev.ID))
	return res, err
}

// pace waits until the sink may post its next message, at most one per
// Pace in its channel.
func (s *SlackSink) pace(ctx context.Context) error {
	if err := s.pacer.Wait(ctx); err != nil {
		return fmt.Errorf("slack sink %q: waiting for the channel's pace: %w", s.cfg.Name, err)
	}
	return nil
}

// fail classifies a Web API error and words it without the token.
func (s *SlackSink) fail(method string, ev *event.Event, err error) (Result, error) {
	return slackResult(err), fmt.Errorf("slack sink %q: %s for %s: %s", s.cfg.Name, method, ev.ID, s.clean(err))
}

// clean returns err's text without the token.
func (s *SlackSink) clean(err error) string {
	return s.secrets.String(err.Error())
}

// slackResult says whether a Web API error is worth retrying.
func slackResult(err error) Result {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return Result{Retry: true, RetryAfter: rl.RetryAfter}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return Result{Retry: retryableStatus(sc.Code)}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return Result{Retry: true}
		}
		return Result{}
	}
	// Network failures, timeouts, answers that are not JSON.
	return Result{Retry: true}
}

// messageGone reports an update error that no retry can fix and that must
// not hold back the thread reply.
func messageGone(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "message_not_found", "cant_update_message", "edit_window_closed", "msg_too_long":
		return true
	}
	return false
}

// levelColor returns the side bar colour of a level.
func levelColor(level int) string {
	switch level {
	case 0:
		return colorUrgent
	case 1:
		return colorSevere
	case 2:
		return colorMajor
	}
	return colorMinor
}

// slackEscape escapes the three characters Slack's text formatting reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// what names the alarm: "E1023 Grid overvoltage".
func what(ev *event.Event) string {
	return strings.TrimSpace(ev.Data.EventCode + " " + ev.Data.EventDesc)
}

// where names the place: "Station A / Inverter 42".
func where(ev *event.Event) string {
	station := firstNonEmpty(ev.Data.StationName, ev.Data.StationID)
	device := firstNonEmpty(ev.Data.DeviceName, ev.Data.DeviceSN)
	return strings.Trim(station+" / "+device, " /")
}

func startText(ev *event.Event) string {
	return fmt.Sprintf("%s %s alarm: %s at %s", levelEmoji(ev.Data.Level), strings.ToUpper(ev.Data.LevelName),
		slackEscape(what(ev)), slackEscape(where(ev)))
}

func endText(ev *event.Event) string {
	return fmt.Sprintf("%s %s: %s alarm %s at %s", outcomeEmoji(ev), outcomeWord(ev), strings.ToUpper(ev.Data.LevelName),
		slackEscape(what(ev)), slackEscape(where(ev)))
}

// replyText is the thread reply of an end or invalid.
func replyText(ev *event.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", outcomeEmoji(ev), outcomeWord(ev))
	if ev.Data.RecoveredAt != "" {
		fmt.Fprintf(&b, " at %s", readableTime(ev.Data.RecoveredAt))
	}
	if ev.Data.DurationMs > 0 {
		fmt.Fprintf(&b, " after %s", humanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond))
	}
	b.WriteString(".")
	if ev.Data.Inferred {
		b.WriteString(" (Inferred: the alarm left the upstream list and its recovery record was not found.)")
	}
	return b.String()
}

// startAttachment is the start message's body: what, where, since when, level.
func startAttachment(ev *event.Event) slack.Attachment {
	return slack.Attachment{
		Color:    levelColor(ev.Data.Level),
		Fallback: startText(ev),
		Title:    slackEscape(what(ev)),
		Fields:   alarmFields(ev),
		Footer:   slackEscape("alarm " + ev.Data.OriginID),
	}
}

// endAttachment is the start's body marked resolved or cancelled.
func endAttachment(ev *event.Event) slack.Attachment {
	a := startAttachment(ev)
	a.Color = colorResolved
	if ev.Data.Transition == event.Invalid {
		a.Color = colorCancelled
	}
	a.Fallback = endText(ev)
	a.Title = outcomeWord(ev) + ": " + a.Title
	value := "at " + readableTime(firstNonEmpty(ev.Data.RecoveredAt, ev.Time))
	if ev.Data.DurationMs > 0 {
		value += ", after " + humanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond)
	}
	if ev.Data.Inferred {
		value += " (inferred)"
	}
	a.Fields = append(a.Fields, slack.AttachmentField{Title: outcomeWord(ev), Value: value})
	return a
}

func alarmFields(ev *event.Event) []slack.AttachmentField {
	station := ev.Data.StationID
	if ev.Data.StationName != "" {
		station = ev.Data.StationName + " (" + ev.Data.StationID + ")"
	}
	device := ev.Data.DeviceSN
	if ev.Data.DeviceName != "" {
		device = ev.Data.DeviceName + " (" + ev.Data.DeviceSN + ")"
	}
	return []slack.AttachmentField{
		{Title: "Level", Value: ev.Data.LevelName, Short: true},
		{Title: "Since", Value: readableTime(ev.Data.OccurredAt), Short: true},
		{Title: "Station", Value: slackEscape(station), Short: true},
		{Title: "Device", Value: slackEscape(device), Short: true},
	}
}

func outcomeWord(ev *event.Event) string {
	if ev.Data.Transition == event.Invalid {
		return "Cancelled"
	}
	return "Resolved"
}

func outcomeEmoji(ev *event.Event) string {
	if ev.Data.Transition == event.Invalid {
		return ":heavy_multiplication_x:"
	}
	return ":white_check_mark:"
}

func levelEmoji(level int) string {
	switch level {
	case 0:
		return ":red_circle:"
	case 1:
		return ":large_orange_circle:"
	case 2:
		return ":large_yellow_circle:"
	}
	return ":large_blue_circle:"
}

// readableTime writes an event time as "2026-11-21 08:00:00 UTC".
func readableTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// humanDuration writes d as "2d 3h 4m", "1h 5m" or "45s".
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	hours := d / time.Hour
	d -= hours * time.Hour
	minutes := d / time.Minute
	seconds := (d - minutes*time.Minute) / time.Second
	if days > 0 {
		seconds = 0
	}
	var parts []string
	for _, p := range []struct {
		n    time.Duration
		unit string
	}{{days, "d"}, {hours, "h"}, {minutes, "m"}, {seconds, "s"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", p.n, p.unit))
		}
	}
	return strings.Join(parts, " ")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
