// Package robot is what the sink types that post to a vendor's webhook
// robot share (dingtalk, wecom, feishu, teams, and pagerduty's Events API):
// the options every one of them has, their pacing per robot, the post and
// its answer, reminders, and storm digests of messages that stand on their
// own. A vendor's package holds only what is its own, in a Vendor: its
// pace, how its webhook URL names the robot, its signing rule, its table
// of answer codes; and, in a Payload, the message JSON of its events and
// digests. Adding a robot is such a package and one line in
// internal/notify/registry.
package robot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Vendor is what one robot sink type holds of its own besides its
// payloads. It is a package-level value of the vendor's package, whose Type
// is its Type. Name, Doc, Windows, Key, and Decode (with Options) or Own
// (with Robot and URLDoc) are required; every other field may be left
// unset.
type Vendor struct {
	// Name is the sink type's name, such as "dingtalk": every error starts
	// with `dingtalk sink "ops"`, and the robot's limiter is keyed by it.
	Name string
	// Doc is the sink type's, as sinktype.Type has it.
	Doc string
	// URLDoc and SecretDoc say what url_env and secret_env hold, which the
	// default decoding reads (secret_env where the vendor signs): Type
	// lists them first, then Options, the vendor's own keys and its
	// templates' (with Decode, every key it reads).
	URLDoc, SecretDoc string
	Options           []sinktype.Option
	// Robot is what the vendor calls what its webhook URL reaches
	// ("robot", "bot", "workflow"), for the problems of url_env.
	Robot string
	// Windows are the pace each robot is kept to.
	Windows []notify.Window
	// Key returns what identifies the robot, from its webhook URL and the
	// sink's secret (an access token, a routing key): the sinks of one
	// robot share a limiter by it. Its error says why the URL cannot be a
	// robot's, without echoing it.
	Key func(url, secret string) (string, error)
	// SecretPath says that the webhook URL's path is a secret, as its
	// query always is, and so is Key (a token at the end of the path).
	SecretPath bool
	// Target, when set, says where a sink posts without any secret, from
	// its URL (default: the URL without its query).
	Target func(url string) string

	// Decode, when set, reads the options of a sink in place of the
	// default, which reads url_env (the robot's webhook URL, required,
	// which Key and URLHint check); secret_env where the vendor signs
	// (which SecretHint checks); the vendor's own keys with Own; then the
	// title and text templates, whose values TitleEscape and TextEscape
	// escape (nil: as they are).
	Decode                  func(d *sinktype.Decoder) (Options, Payload)
	Own                     func(d *sinktype.Decoder) Payload
	URLHint, SecretHint     func(value string) string
	TitleEscape, TextEscape func(string) string

	// Sign, when set, signs one attempt of a sink that has a secret, at
	// now: it returns the URL and the body to post.
	Sign func(secret string, now time.Time, url string, body []byte) (string, []byte)
	// Pace, when set, is how errors name the robot's pace, which the sink
	// then waits for before it signs (DingTalk signs in the URL, so that a
	// signature is as fresh as the request). Unset, notify.Poster waits for
	// it, after Sign, and its errors name it "the destination's rate limit".
	Pace string
	// What, when set, names the attempt at ev after the sink's name, such
	// as "trigger of a1:start (dedup_key a1)" (default "post of" and the
	// event's id).
	What func(ev *event.Event) string
	// Codes, when set, is the table of the codes the vendor's JSON answer
	// to a 2xx holds.
	Codes *Codes
	// Answer, when set, reads the answer to a 2xx, for a vendor whose
	// answer is no table of codes.
	Answer func(a *Attempt, body []byte) (notify.Result, error)
	// Refused, when set, words an answer that is no 2xx, as Post returned
	// it, with what to fix; the error is cleaned of secrets after it.
	Refused func(a *Attempt, se *notify.StatusError, res notify.Result, err error) (notify.Result, error)
}

// Type is the sink type of v, for internal/notify/registry.
func (v *Vendor) Type() sinktype.Type {
	var opts []sinktype.Option
	if v.Decode == nil {
		opts = append(opts, sinktype.Option{Key: "url_env", Doc: v.URLDoc})
		if v.Sign != nil {
			opts = append(opts, sinktype.Option{Key: "secret_env", Doc: v.SecretDoc})
		}
	}
	return sinktype.Type{Name: v.Name, Doc: v.Doc, Options: append(opts, v.Options...), Decode: v.decode}
}

// secrets adds the secrets of a sink posting to url with secret to set:
// the secret, the values of the URL's query and, where the path is one,
// its path and its key.
func (v *Vendor) secrets(set *redact.Set, url, secret string) {
	set.Add(secret)
	set.AddURL(url, v.SecretPath)
	if v.SecretPath {
		key, _ := v.Key(url, secret)
		set.Add(key)
	}
}

// Sink posts each event as one message to one robot, after the robot's
// pace, signed where its vendor signs, and reads the vendor's answer. It
// keeps no memory of an alarm: a chat robot can neither edit what it sent
// nor reply to it, and PagerDuty keys an alert by the alarm's own id.
type Sink struct {
	v              *Vendor
	name, prefix   string
	opts           Options
	payload        Payload
	clock          clock.Clock
	limiter        *notify.Limiter
	poster         *notify.Poster
	templateFailed func(sink string, ev *event.Event, err error)
}

// newSink returns the sink called name of o, pacing with limiter; deps
// have their defaults.
func (v *Vendor) newSink(name string, o Options, p Payload, deps sinktype.Deps, limiter *notify.Limiter) (*Sink, error) {
	if name == "" {
		return nil, errors.New(v.Name + " sink: no name")
	}
	if _, err := v.Key(o.URL, o.Secret); err != nil {
		return nil, fmt.Errorf("%s sink %q: %w", v.Name, name, err)
	}
	secrets := redact.New()
	v.secrets(secrets, o.URL, o.Secret)
	pacer := limiter
	if v.Pace != "" {
		pacer = nil
	}
	return &Sink{
		v: v, name: name, prefix: fmt.Sprintf("%s sink %q", v.Name, name), opts: o, payload: p,
		clock: deps.Clock, limiter: limiter, templateFailed: deps.TemplateFailed,
		poster: notify.NewPoster(deps.HTTP, pacer, deps.Clock, 0, secrets),
	}, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.name }

// Send posts one message about the event: it waits for the robot's pace,
// signs the request at the time it is sent, and reads the vendor's answer.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	what := s.prefix + ": post of " + d.EventID
	if s.v.What != nil {
		what = s.prefix
	}
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	if s.v.What != nil {
		what = s.prefix + ": " + s.v.What(ev)
	}
	return s.event(ctx, what, ev)
}

// event posts the message about ev, the default in place of a template that
// fails on it, which TemplateFailed is told of.
func (s *Sink) event(ctx context.Context, what string, ev *event.Event) (notify.Result, error) {
	body, err := s.payload.Body(ev, &s.opts)
	if body == nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	if err != nil {
		s.templateFailed(s.name, ev, err)
	}
	return s.post(ctx, &Attempt{What: what, Event: true, sink: s}, body)
}

// post posts body once the robot's pace allows it, signed at the time it is
// sent, and reads the answer.
func (s *Sink) post(ctx context.Context, a *Attempt, body []byte) (notify.Result, error) {
	if s.v.Pace != "" {
		if err := s.limiter.Wait(ctx); err != nil {
			return notify.WaitResult(err), fmt.Errorf("%s: waiting for %s: %w", a.What, s.v.Pace, err)
		}
	}
	url := s.opts.URL
	if a.Signed = s.opts.Secret != "" && s.v.Sign != nil; a.Signed {
		url, body = s.v.Sign(s.opts.Secret, s.clock.Now(), url, body)
	}
	answer, res, err := s.poster.PostJSON(ctx, a.What, url, body, nil)
	if err != nil {
		if se, ok := errors.AsType[*notify.StatusError](err); ok && s.v.Refused != nil {
			res, err = s.v.Refused(a, se, res, err)
		}
		return res, s.poster.Clean(err)
	}
	switch {
	case s.v.Codes != nil:
		res, err = s.v.Codes.answer(a, answer)
	case s.v.Answer != nil:
		res, err = s.v.Answer(a, answer)
	}
	return res, s.poster.Clean(err)
}

// Chat is the Sink of a chat robot, whose messages people read: it also
// reminds of alarms still ongoing and shows storm digests, each as
// messages that stand on their own.
type Chat struct {
	Sink
	digests Digests
}

// Remind posts the start's message again, the reminder's note (such as
// "Reminder, ongoing for 4h") in its title: a robot cannot reply to a
// message. It counts against the robot's pace like any message. Like Send,
// it makes one attempt.
func (c *Chat) Remind(ctx context.Context, ev *event.Event, _ map[string]string) (notify.Result, error) {
	return c.event(ctx, fmt.Sprintf("%s: reminder of %s", c.prefix, ev.Data.OriginID), ev)
}

// KeepsNoMemory reports that a robot's sink remembers nothing of its
// starts, so that alarm management reminds it of alarms it has no memory of.
func (c *Chat) KeepsNoMemory() bool { return true }
