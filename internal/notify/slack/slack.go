// Package slack is the Slack sink type: with a bot token, a start is a
// message coloured by level, and its end a reply in the start's thread with
// the start updated in place; with an incoming webhook, every event is a
// message of its own.
package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
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

// DefaultAPIURL is Slack's Web API, as slack-go publishes it.
const DefaultAPIURL = slackapi.APIURL

// Config configures a Slack sink: a bot token and a channel (threads
// and in-place updates), or an incoming webhook URL (plain messages).
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// Channel is the channel id (or name) the bot posts to.
	Channel string
	// Token is the bot token (xoxb-...). It never appears in errors or logs.
	Token string
	// APIURL is the Web API base URL (default DefaultAPIURL).
	APIURL string
	// AppToken is the app-level token (xapp-...) of Socket Mode. With it
	// (and the bot token), starts carry buttons and Listen reads their
	// clicks. It never appears in errors or logs.
	AppToken string
	// WebhookURL selects incoming-webhook mode when set. It is a secret:
	// it never appears in errors or logs.
	WebhookURL string
	// HTTPClient makes the requests (default a new client).
	HTTPClient *http.Client
	// Clock paces the messages (default the real clock).
	Clock clock.Clock
	// Limiter, when set, spaces this sink's messages together with those of
	// every other sink given the same Limiter: Slack's limit is per channel,
	// so sinks posting to one channel share one. Default: a limiter of this
	// sink's own, of one message per Pace.
	Limiter *notify.Limiter
	// Pace is the least time between two messages of this sink, Slack's
	// limit for one channel (default 1s).
	Pace time.Duration
	// Timeout bounds one API request (default 10s).
	Timeout time.Duration
	// Logger receives a line when a start message cannot be updated
	// (default slog.Default()).
	Logger *slog.Logger
	// Message holds the title and text templates (nil: the defaults).
	Message *sinktype.Message
	// TemplateFailed is told when a template failed on an event and the
	// default was sent instead (default: nobody).
	TemplateFailed func(sink string, ev *event.Event, err error)
}

// Sink posts alarms to Slack. With a bot token, a start is a message
// with a side bar coloured by level; its end (or invalid) is a reply in the
// start's thread, and the start message is updated in place to show it
// resolved (or cancelled) and for how long. Without a stored thread, the end
// is posted on its own. With an incoming webhook, every event is a message
// of its own.
type Sink struct {
	cfg Config
	api *slackapi.Client
	log *slog.Logger
	// secrets are the tokens and the incoming webhook's URL, cleaned from
	// every error Send returns.
	secrets *redact.Set
	// hooks posts to the incoming webhook, never following a redirect.
	hooks *http.Client

	pacer *notify.Limiter
}

// New returns a Slack sink.
func New(cfg Config) (*Sink, error) {
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
	s := &Sink{cfg: cfg, log: cfg.Logger, pacer: cfg.Limiter, secrets: redact.New(cfg.Token, cfg.WebhookURL, cfg.AppToken)}
	s.secrets.AddURL(cfg.WebhookURL, true)
	s.hooks = notify.NoRedirects(cfg.HTTPClient)
	if s.pacer == nil {
		s.pacer = notify.NewLimiter(cfg.Clock, notify.Window{N: 1, Per: cfg.Pace})
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
	s.api = slackapi.New(cfg.Token, slackapi.OptionAPIURL(apiURL(cfg.APIURL)), slackapi.OptionHTTPClient(s.hooks))
	return s, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Send posts one event. Rate limiting (HTTP 429) is retried after Slack's
// Retry-After; server errors and network failures are retried; errors such as
// invalid_auth or channel_not_found are not.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	res, err := s.send(ctx, d)
	return res, s.secrets.Error(err)
}

func (s *Sink) send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev := d.Event
	if s.api == nil {
		return s.postWebhook(ctx, ev)
	}
	if ev.Data.Transition == event.Ack || ev.Data.Transition == event.Unack {
		return s.showAck(ctx, d)
	}
	ts, channel := d.Memory[MemoryTS], d.Memory[MemoryChannel]
	if ev.Data.Transition == event.Start || ts == "" || channel == "" {
		return s.post(ctx, ev)
	}
	return s.postInThread(ctx, ev, channel, ts, d.Memory[MemoryAck])
}

// post posts ev as a message of its own: a start, whose channel and ts are
// its memory, or an end whose start has no message to thread under.
func (s *Sink) post(ctx context.Context, ev *event.Event) (notify.Result, error) {
	if err := s.pace(ctx); err != nil {
		return notify.WaitResult(err), err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text, att := s.compose(ev)
	atts := []slackapi.Attachment{att}
	if ev.Data.Transition == event.Start {
		if more, ok := s.extra(att.Color, ev.Data.OriginID, "", false, false); ok {
			atts = append(atts, more)
		}
	}
	channel, ts, err := s.api.PostMessageContext(rctx, s.cfg.Channel,
		slackapi.MsgOptionText(text, false),
		slackapi.MsgOptionAttachments(atts...))
	if err != nil {
		return s.fail("chat.postMessage", ev, err)
	}
	if ev.Data.Transition != event.Start {
		return notify.Result{}, nil
	}
	if channel == "" {
		channel = s.cfg.Channel
	}
	return notify.Result{Memory: map[string]string{MemoryTS: ts, MemoryChannel: channel}}, nil
}

// postInThread updates the start message, then replies in its thread. The
// update goes first because repeating it is harmless: a retry after a failed
// reply does not post the reply twice. A start message that can no longer be
// edited does not hold the reply back. The updated start keeps the line of
// its acknowledgement (ackLine, from the memory), without the buttons.
func (s *Sink) postInThread(ctx context.Context, ev *event.Event, channel, ts, ackLine string) (notify.Result, error) {
	uctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	text, att := s.compose(ev)
	atts := []slackapi.Attachment{att}
	if more, ok := s.extra(att.Color, ev.Data.OriginID, ackLine, false, true); ok {
		atts = append(atts, more)
	}
	_, _, _, err := s.api.UpdateMessageContext(uctx, channel, ts,
		slackapi.MsgOptionText(text, false),
		slackapi.MsgOptionAttachments(atts...))
	cancel()
	if err != nil {
		if !messageGone(err) {
			return s.fail("chat.update", ev, err)
		}
		s.log.Warn("could not update the start message, replying in its thread only",
			"sink", s.cfg.Name, "event_id", ev.ID, "channel", channel, "ts", ts, "error", s.clean(err))
	}
	if err := s.pace(ctx); err != nil {
		return notify.WaitResult(err), err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, _, err = s.api.PostMessageContext(rctx, channel,
		slackapi.MsgOptionText(replyText(ev), false),
		slackapi.MsgOptionTS(ts))
	if err != nil {
		return s.fail("chat.postMessage (thread reply)", ev, err)
	}
	return notify.Result{}, nil
}

// webhookMessage is the payload of an incoming webhook.
type webhookMessage struct {
	Text        string                `json:"text"`
	Attachments []slackapi.Attachment `json:"attachments,omitempty"`
}

func (s *Sink) postWebhook(ctx context.Context, ev *event.Event) (notify.Result, error) {
	text, att := s.compose(ev)
	body, err := json.Marshal(webhookMessage{Text: text, Attachments: []slackapi.Attachment{att}})
	if err != nil {
		return notify.Result{}, fmt.Errorf("slack sink %q: event %s: %w", s.cfg.Name, ev.ID, err)
	}
	if err := s.pace(ctx); err != nil {
		return notify.WaitResult(err), err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return notify.Result{}, fmt.Errorf("slack sink %q: incoming webhook: cannot build the request (check webhook_url)", s.cfg.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	_, res, err := notify.Post(s.hooks, req, s.cfg.Clock.Now, fmt.Sprintf("slack sink %q: incoming webhook post of %s", s.cfg.Name, ev.ID), s.secrets)
	return res, err
}

// compose returns the text and attachment of ev's message with the sink's
// templates, telling TemplateFailed when one failed and the default stood in.
func (s *Sink) compose(ev *event.Event) (string, slackapi.Attachment) {
	text, att, err := compose(s.cfg.Message, ev)
	if err != nil && s.cfg.TemplateFailed != nil {
		s.cfg.TemplateFailed(s.cfg.Name, ev, err)
	}
	return text, att
}

// compose returns the text and attachment of ev's message: the start, or its
// end (posted alone, or as the start updated in place). The title template
// writes the attachment's title, the text template the message's text.
func compose(m *sinktype.Message, ev *event.Event) (string, slackapi.Attachment, error) {
	def := sinktype.Text{Title: slackEscape(sinktype.What(ev)), Body: startText(ev)}
	att := startAttachment(ev)
	if ev.Data.Transition != event.Start {
		def = sinktype.Text{Title: outcomeWord(ev) + ": " + slackEscape(sinktype.What(ev)), Body: endText(ev)}
		att = endAttachment(ev)
	}
	txt, err := m.Render(ev, def)
	att.Title, att.Fallback = txt.Title, txt.Body
	return txt.Body, att, err
}

// pace waits until the sink may post its next message, at most one per
// Pace in its channel.
func (s *Sink) pace(ctx context.Context) error {
	if err := s.pacer.Wait(ctx); err != nil {
		return fmt.Errorf("slack sink %q: waiting for the channel's pace: %w", s.cfg.Name, err)
	}
	return nil
}

// fail classifies a Web API error and words it without the token.
func (s *Sink) fail(method string, ev *event.Event, err error) (notify.Result, error) {
	return slackResult(err), fmt.Errorf("slack sink %q: %s for %s: %s", s.cfg.Name, method, ev.ID, s.clean(err))
}

// clean returns err's text without the token.
func (s *Sink) clean(err error) string {
	return s.secrets.String(err.Error())
}

// slackResult says whether a Web API error is worth retrying.
func slackResult(err error) notify.Result {
	var rl *slackapi.RateLimitedError
	if errors.As(err, &rl) {
		return notify.Result{Retry: true, RetryAfter: rl.RetryAfter}
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return notify.Result{Retry: sc.Code == http.StatusRequestTimeout || sc.Code == http.StatusTooEarly || sc.Code == http.StatusTooManyRequests || sc.Code >= 500}
	}
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return notify.Result{Retry: true}
		}
		return notify.Result{}
	}
	// Network failures, timeouts, answers that are not JSON.
	return notify.Result{Retry: true}
}

// messageGone reports an update error that no retry can fix and that must
// not hold back the thread reply.
func messageGone(err error) bool {
	var se slackapi.SlackErrorResponse
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
	return sinktype.ByLevel(level, colorUrgent, colorSevere, colorMajor, colorMinor)
}

// slackEscape escapes the three characters Slack's text formatting reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func startText(ev *event.Event) string {
	return fmt.Sprintf("%s %s alarm: %s at %s", levelEmoji(ev.Data.Level), strings.ToUpper(ev.Data.LevelName),
		slackEscape(sinktype.What(ev)), slackEscape(sinktype.Where(ev)))
}

func endText(ev *event.Event) string {
	return fmt.Sprintf("%s %s: %s alarm %s at %s", outcomeEmoji(ev), outcomeWord(ev), strings.ToUpper(ev.Data.LevelName),
		slackEscape(sinktype.What(ev)), slackEscape(sinktype.Where(ev)))
}

// replyText is the thread reply of an end or invalid.
func replyText(ev *event.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", outcomeEmoji(ev), outcomeWord(ev))
	if ev.Data.RecoveredAt != "" {
		fmt.Fprintf(&b, " at %s", sinktype.ReadableTime(ev.Data.RecoveredAt))
	}
	if ev.Data.DurationMs > 0 {
		fmt.Fprintf(&b, " after %s", sinktype.HumanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond))
	}
	b.WriteString(".")
	if ev.Data.Inferred {
		b.WriteString(" (Inferred: the alarm left the upstream list and its recovery record was not found.)")
	}
	return b.String()
}

// startAttachment is the start message's body: what, where, since when, level.
func startAttachment(ev *event.Event) slackapi.Attachment {
	return slackapi.Attachment{
		Color:    levelColor(ev.Data.Level),
		Fallback: startText(ev),
		Title:    slackEscape(sinktype.What(ev)),
		Fields:   alarmFields(ev),
		Footer:   slackEscape("alarm " + ev.Data.OriginID),
	}
}

// endAttachment is the start's body marked resolved or cancelled.
func endAttachment(ev *event.Event) slackapi.Attachment {
	a := startAttachment(ev)
	a.Color = colorResolved
	if ev.Data.Transition == event.Invalid {
		a.Color = colorCancelled
	}
	a.Fallback = endText(ev)
	a.Title = outcomeWord(ev) + ": " + a.Title
	value := "at " + sinktype.ReadableTime(sinktype.FirstNonEmpty(ev.Data.RecoveredAt, ev.Time))
	if ev.Data.DurationMs > 0 {
		value += ", after " + sinktype.HumanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond)
	}
	if ev.Data.Inferred {
		value += " (inferred)"
	}
	a.Fields = append(a.Fields, slackapi.AttachmentField{Title: outcomeWord(ev), Value: value})
	return a
}

func alarmFields(ev *event.Event) []slackapi.AttachmentField {
	station := ev.Data.StationID
	if ev.Data.StationName != "" {
		station = ev.Data.StationName + " (" + ev.Data.StationID + ")"
	}
	device := ev.Data.DeviceSN
	if ev.Data.DeviceName != "" {
		device = ev.Data.DeviceName + " (" + ev.Data.DeviceSN + ")"
	}
	return []slackapi.AttachmentField{
		{Title: "Level", Value: ev.Data.LevelName, Short: true},
		{Title: "Since", Value: sinktype.ReadableTime(ev.Data.OccurredAt), Short: true},
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
	return sinktype.ByLevel(level, ":red_circle:", ":large_orange_circle:", ":large_yellow_circle:", ":large_blue_circle:")
}
