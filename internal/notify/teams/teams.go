// Package teams is the teams sink type: it posts each event as an Adaptive
// Card to a Microsoft Teams channel or chat through a Workflows (Power
// Automate) webhook, the replacement of the retired Office 365 connectors.
// The start of an alarm, and its end or cancellation, are cards of their
// own: a workflow's webhook cannot reply in a thread or update a card.
package teams

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// The pace the sink keeps per workflow. Microsoft documents no rate limit
// of the Workflows webhook trigger itself; what it documents nearby is 4
// requests a second for Teams incoming webhooks, and 100 calls per 60 s per
// connection for the Teams connector, whose "Post card in a chat or
// channel" action the workflow runs once per message. The sink keeps under
// both, with a margin (and a fifth of the minute left to other flows on the
// same connection), since a throttled run fails after the trigger already
// answered 202, out of relay's sight.
const (
	PerSecond = 4
	Second    = 1100 * time.Millisecond
	PerMinute = 80
	Minute    = 61 * time.Second
	// MaxBody bounds the JSON body in bytes: Teams refuses a posted message
	// over about 28 KB ("request entity too large"), and the workflow adds
	// to what it is given.
	MaxBody = 24000
	// MaxTitle bounds the card's title in bytes.
	MaxTitle = 500
	// maxValue bounds each fact's value in bytes, so that the facts, the
	// originId among them, survive an upstream value of any length.
	maxValue = 1000
)

// vendor is what a teams sink is of its own: a Workflows webhook, paced as
// above, named by its trigger URL's host and path, that answers in HTTP
// statuses alone.
//
// A 2xx (the trigger answers 202 Accepted) is a delivery: what the flow
// does next is not reported back. A 429 is retried after its Retry-After,
// which every sink of the workflow waits out; 5xx and network failures are
// retried; 400 (the trigger or the flow refused the body), 401, 403 and
// 404 (a wrong or revoked sig, a deleted or disabled flow) dead-letter the
// event with what to fix.
var vendor = robot.Vendor{
	Name:   "teams",
	Doc:    "posts each event as an Adaptive Card coloured by level to a Microsoft Teams channel or chat through a Workflows webhook, at most 4 a second and 80 a minute",
	URLDoc: "variable holding the workflow's HTTP POST URL, made with the Workflows app in Teams (\"Post to a channel when a webhook request is received\"), query included (required; a secret: its sig authorises posting)",
	Options: []sinktype.Option{
		{Key: "title", Doc: "Go template of the card's heading, in Teams' Markdown subset, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of a text under the card's facts, in Teams' Markdown subset (default: none; the facts are level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Robot:   "workflow",
	Windows: []notify.Window{{N: PerSecond, Per: Second}, {N: PerMinute, Per: Minute}},
	// Key is the workflow's host and path, whatever sig the URL carries.
	Key:         func(raw, _ string) (string, error) { return workflow(raw), CheckURL(raw) },
	Own:         func(*sinktype.Decoder) robot.Payload { return cards{} },
	TitleEscape: Escape,
	TextEscape:  Escape,
	Refused:     refused,
}

// Type is the teams sink type.
var Type = vendor.Type()

// CheckURL refuses a URL that cannot be a Workflows webhook trigger, without
// echoing it: one of a retired Office 365 connector, or one without the
// query that authorises it.
func CheckURL(raw string) error {
	u, err := robot.WebhookURL(raw)
	if err != nil {
		return err
	}
	host := strings.ToLower(u.Hostname())
	if strings.HasSuffix(host, ".webhook.office.com") || host == "outlook.office.com" || host == "outlook.office365.com" {
		return errors.New("the URL is an Office 365 connector's, which Microsoft retired: create a webhook with the Workflows app in Teams (\"Post to a channel when a webhook request is received\") and give its URL")
	}
	q := u.Query()
	for _, p := range []string{"api-version", "sp", "sv", "sig"} {
		if q.Get(p) == "" {
			return fmt.Errorf("the webhook URL has no %s parameter: copy the workflow's whole HTTP POST URL, query included", p)
		}
	}
	return nil
}

// workflow names the workflow of a trigger URL whatever sig it carries: its
// host and path.
func workflow(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	// The host ignores case and the default port: one workflow, one key.
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && p != "443" && !(p == "80" && u.Scheme == "http") {
		host += ":" + p
	}
	return host + u.Path
}

// refused says what to fix when the workflow refuses a card: the templates
// too for the card of an event, whose text they write.
func refused(a *robot.Attempt, se *notify.StatusError, res notify.Result, err error) (notify.Result, error) {
	switch se.Status {
	case http.StatusTooManyRequests:
		// Without a Retry-After, a minute clears every window of the
		// workflow; the other sinks of it must not post into the throttle.
		if res.RetryAfter <= 0 {
			res.RetryAfter = time.Minute
		}
		a.Block(res.RetryAfter)
		err = fmt.Errorf("%w: the workflow is throttled; every sink of it waits %s", err, res.RetryAfter)
	case http.StatusBadRequest:
		check := "check "
		if a.Event {
			check = "check the title and text templates (relay route --render shows the body), and "
		}
		err = fmt.Errorf("%w: the workflow refused the card: %sthat the flow's trigger is \"When a Teams webhook request is received\"", err, check)
	case http.StatusUnauthorized, http.StatusForbidden:
		err = fmt.Errorf("%w: the workflow refused the URL's signature: check that url_env holds the workflow's current URL (a flow saved anew, or whose owner left, has a new one)", err)
	case http.StatusNotFound:
		err = fmt.Errorf("%w: no workflow answers at this URL (deleted or turned off): check that url_env holds a live workflow's URL", err)
	}
	return res, err
}

// cards are the payloads of a teams sink, which has no options of its own
// besides those of every robot.
type cards struct{}

// Body is the package's Body with the sink's templates.
func (cards) Body(ev *event.Event, o *robot.Options) ([]byte, error) { return Body(ev, o.Message) }

// Body returns the JSON body of the card about ev: the Workflows message
// envelope around an Adaptive Card 1.4 whose body is the title of m as a
// heading coloured by level, the alarm's facts as a FactSet, and the text
// of m when it has one (the defaults where m sets none: no text), the text
// cut so that the body stays within MaxBody. The error, when not nil, says
// which template failed on ev: the body then holds the default in its
// place. Send and Render both use it, so that relay route --render shows
// exactly what is sent.
func Body(ev *event.Event, m *sinktype.Message) ([]byte, error) {
	text, tmplErr := m.Render(ev, defaultText(ev))
	title := sinktype.Truncate(sinktype.OneLine(text.Title), MaxTitle)
	if title == "" {
		title = sinktype.Truncate(Escape(sinktype.Headline(ev)), MaxTitle)
	}
	var facts []fact
	for _, f := range sinktype.Fields(ev) {
		facts = append(facts, fact{Title: f[0], Value: Escape(sinktype.Truncate(f[1], maxValue))})
	}
	c := card{
		Schema:  "http://adaptivecards.io/schemas/adaptive-card.json",
		Type:    "AdaptiveCard",
		Version: "1.4",
		MSTeams: &msteams{Width: "Full"},
		Body: []element{
			{Type: "TextBlock", Text: title, Size: "Large", Weight: "Bolder", Color: Color(ev), Wrap: true},
			{Type: "FactSet", Facts: facts},
		},
	}
	if strings.TrimSpace(text.Body) != "" {
		c.Body = append(c.Body, element{Type: "TextBlock", Text: text.Body, Wrap: true})
	}
	msg := message{Type: "message", Attachments: []attachment{{ContentType: "application/vnd.microsoft.card.adaptive", Content: c}}}
	if len(c.Body) == 3 {
		fit(&msg, MaxBody)
	}
	body, err := encode(msg)
	if err != nil {
		return nil, fmt.Errorf("the card does not encode: %w", err)
	}
	return body, tmplErr
}

// fit cuts the text of msg's card (its last element), as little as it can,
// so that its body is at most limit bytes.
func fit(msg *message, limit int) {
	body := msg.Attachments[0].Content.Body
	sinktype.FitText(&body[len(body)-1].Text, limit, func() ([]byte, error) { return encode(*msg) })
}

func encode(msg message) ([]byte, error) { return sinktype.JSON(msg) }

// message is the body a Workflows webhook takes: a message with one
// Adaptive Card attachment, as Microsoft's Workflows samples post it.
type message struct {
	Type        string       `json:"type"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	ContentType string  `json:"contentType"`
	ContentURL  *string `json:"contentUrl"`
	Content     card    `json:"content"`
}

type card struct {
	Schema  string    `json:"$schema,omitempty"`
	Type    string    `json:"type"`
	Version string    `json:"version,omitempty"`
	MSTeams *msteams  `json:"msteams,omitempty"`
	Body    []element `json:"body"`
	Actions []action  `json:"actions,omitempty"`
}

// action is a card's button: Action.ShowCard unfolds card under it, in
// place, without a round trip.
type action struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	Card  *card  `json:"card,omitempty"`
}

// msteams widens the card to the conversation's width in Teams.
type msteams struct {
	Width string `json:"width"`
}

type element struct {
	Type   string `json:"type"`
	Text   string `json:"text,omitempty"`
	Size   string `json:"size,omitempty"`
	Weight string `json:"weight,omitempty"`
	Color  string `json:"color,omitempty"`
	Wrap   bool   `json:"wrap,omitempty"`
	// IsSubtle greys the text; Spacing "None" sets it right under the one
	// before.
	IsSubtle bool   `json:"isSubtle,omitempty"`
	Spacing  string `json:"spacing,omitempty"`
	Facts    []fact `json:"facts,omitempty"`
}

type fact struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// Color is the Adaptive Card colour of the title: Attention for an urgent
// start, Warning for a severe or major one, Accent for a minor one, Good
// for an end and Default for a cancellation.
func Color(ev *event.Event) string {
	return sinktype.Shade(ev, "Good", "Default", "Attention", "Warning", "Warning", "Accent")
}

// defaultText is the default card's title (the headline after a level
// mark) and text (none: the facts say it all).
func defaultText(ev *event.Event) sinktype.Text {
	return sinktype.Text{Title: sinktype.Mark(ev) + " " + Escape(sinktype.Headline(ev))}
}

// Escape makes s plain text in an Adaptive Card TextBlock or fact, which
// Teams renders as a subset of Markdown: line breaks become spaces, the
// characters of emphasis, code and links are backslash-escaped as CommonMark
// has it, a leading list or heading mark too, and braces, so that "{{DATE(
// ...)}}" is not read as a date function. Microsoft documents the Markdown
// subset, not its escapes: that Teams honours the backslashes is CommonMark's
// rule, not confirmed against Teams.
func Escape(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\r' || r == '\n':
			b.WriteByte(' ')
		case strings.ContainsRune("\\*_[]`~{}", r), i == 0 && strings.ContainsRune("-+#>", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
