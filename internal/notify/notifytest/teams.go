package notifytest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The limits the fake Teams workflow enforces: 4 requests a second, as
// Teams documents for incoming webhooks, and 100 a minute, the Teams
// connector's documented throttle per connection, which the workflow's "Post
// card in a chat or channel" action uses once per message. A body over 28 KB
// is refused: Teams' limit of a posted message.
const (
	TeamsPerSecond = 4
	TeamsPerMinute = 100
	teamsMaxBody   = 28 << 10
)

// TeamsMessage is one request the fake workflow got.
type TeamsMessage struct {
	Received
	// Status is the HTTP status answered, Code the error code of the
	// answer ("" for 202).
	Status int
	Code   string
}

// Taken and Answer make m a Message.
func (m TeamsMessage) Taken() bool    { return m.Status == http.StatusAccepted }
func (m TeamsMessage) Answer() string { return fmt.Sprintf("HTTP %d %s", m.Status, m.Code) }

// Card returns the Adaptive Card of the message's first attachment.
func (m TeamsMessage) Card() map[string]any {
	atts, _ := m.Body["attachments"].([]any)
	if len(atts) == 0 {
		return nil
	}
	att, _ := atts[0].(map[string]any)
	card, _ := att["content"].(map[string]any)
	return card
}

// Text returns what the card says: each TextBlock's text and each fact as
// "title: value", one a line, then the title of each button and what an
// Action.ShowCard unfolds.
func (m TeamsMessage) Text() string {
	return strings.Join(cardTexts(m.Card()), "\n")
}

// Hidden returns what the card's Action.ShowCard buttons unfold, one line
// a text, "" when it has none.
func (m TeamsMessage) Hidden() string {
	var lines []string
	actions, _ := m.Card()["actions"].([]any)
	for _, a := range actions {
		act, _ := a.(map[string]any)
		if sub, ok := act["card"].(map[string]any); ok {
			lines = append(lines, cardTexts(sub)...)
		}
	}
	return strings.Join(lines, "\n")
}

// cardTexts returns the texts of a card's body, then those of its actions.
func cardTexts(card map[string]any) []string {
	var lines []string
	body, _ := card["body"].([]any)
	for _, e := range body {
		el, _ := e.(map[string]any)
		if s, ok := el["text"].(string); ok {
			lines = append(lines, s)
		}
		facts, _ := el["facts"].([]any)
		for _, f := range facts {
			fact, _ := f.(map[string]any)
			lines = append(lines, fmt.Sprintf("%v: %v", fact["title"], fact["value"]))
		}
	}
	actions, _ := card["actions"].([]any)
	for _, a := range actions {
		act, _ := a.(map[string]any)
		if s, ok := act["title"].(string); ok {
			lines = append(lines, s)
		}
		if sub, ok := act["card"].(map[string]any); ok {
			lines = append(lines, cardTexts(sub)...)
		}
	}
	return lines
}

// Teams is a fake Microsoft Teams workflow (Power Automate) with the "When a
// Teams webhook request is received" trigger. It checks the trigger URL as
// Azure Logic Apps' shared access URLs are checked: api-version, sp, sv and
// sig must be in the query, and sig must be the workflow's; the answers are
// those of Logic Apps (401 AuthorizationFailed or
// DirectApiInvalidAuthorizationSignature, 400 MissingApiVersionParameter,
// 404 WorkflowNotFound; the codes for a wrong sig are as public reports show
// them). A message is taken with 202 Accepted, within the limits above, over
// which it answers 429 with Retry-After.
//
// The fake is stricter than the real trigger, which takes any JSON and
// fails the flow's run later, out of the sender's sight: it answers 400
// InvalidRequestContent unless the body is the Workflows message envelope,
// {"type":"message","attachments":[{"contentType":
// "application/vnd.microsoft.card.adaptive","content":{...}}]}, whose card
// is an AdaptiveCard of version 1.4 with a non-empty body of elements of
// that version, and whose actions (an Action.ShowCard's card included) are
// of that version too.
type Teams struct {
	fake[TeamsMessage]
	workflow string
	sig      string
	accepted []time.Time
}

// NewTeams starts a fake workflow whose trigger URL is signed with sig,
// telling the time with now. It is closed when the test ends.
func NewTeams(t testing.TB, sig string, now func() time.Time) *Teams {
	t.Helper()
	f := &Teams{workflow: "8e4f1c2a9b7d4e6f8a0b1c2d3e4f5a6b", sig: sig}
	f.start(t, now, f.serve)
	return f
}

// Path returns the path of the workflow's trigger.
func (f *Teams) Path() string {
	return "/workflows/" + f.workflow + "/triggers/manual/paths/invoke"
}

// URL returns the workflow's trigger URL with its query, as the Workflows
// app shows it.
func (f *Teams) URL() string {
	q := url.Values{"api-version": {"2016-06-01"}, "sp": {"/triggers/manual/run"}, "sv": {"1.0"}, "sig": {f.sig}}
	return f.server.URL + f.Path() + "?" + q.Encode()
}

func (f *Teams) serve(w http.ResponseWriter, r *http.Request) {
	body, decoded, bodyErr := readJSON(r)
	msg := TeamsMessage{Received: Received{At: f.now(), Body: decoded, Size: len(body)}}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	var text string
	switch {
	case r.URL.Path != f.Path():
		msg.Status, msg.Code, text = http.StatusNotFound, "WorkflowNotFound", "The workflow could not be found."
	case r.Method != http.MethodPost:
		msg.Status, msg.Code, text = http.StatusMethodNotAllowed, "TriggerRequestMethodNotValid", "The HTTP method for this request is not valid: expected 'Post'."
	case !q.Has("api-version"):
		msg.Status, msg.Code, text = http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."
	case q.Get("sp") == "" || q.Get("sv") == "" || q.Get("sig") == "":
		msg.Status, msg.Code, text = http.StatusUnauthorized, "AuthorizationFailed", "Required parameters for shared access URL are permissions ('sp'), version ('sv'), and signature ('sig')."
	case q.Get("sig") != f.sig:
		msg.Status, msg.Code, text = http.StatusUnauthorized, "DirectApiInvalidAuthorizationSignature", "The provided authorization signature is not valid."
	case len(body) > teamsMaxBody:
		msg.Status, msg.Code, text = http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "The message is over 28 KB."
	case countWithin(f.accepted, msg.At, time.Second) >= TeamsPerSecond || countWithin(f.accepted, msg.At, time.Minute) >= TeamsPerMinute:
		msg.Status, msg.Code, text = http.StatusTooManyRequests, "TooManyRequests", "Rate limit is exceeded. Try again later."
		w.Header().Set("Retry-After", fmt.Sprint(f.retryAfter(msg.At)))
	case bodyErr != nil:
		msg.Status, msg.Code, text = http.StatusBadRequest, "InvalidRequestContent", "The request content is not valid JSON."
	default:
		if problem := teamsEnvelope(msg.Body); problem != "" {
			msg.Status, msg.Code, text = http.StatusBadRequest, "InvalidRequestContent", problem
			break
		}
		msg.Status = http.StatusAccepted
		f.accepted = append(f.accepted, msg.At)
	}
	f.messages = append(f.messages, msg)
	if msg.Status == http.StatusAccepted {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(msg.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": msg.Code, "message": text}})
}

// retryAfter is the whole seconds until one more message keeps both limits.
func (f *Teams) retryAfter(now time.Time) int {
	free := now
	for _, w := range []struct {
		n   int
		per time.Duration
	}{{TeamsPerSecond, time.Second}, {TeamsPerMinute, time.Minute}} {
		var within []time.Time
		for _, at := range f.accepted {
			if now.Sub(at) < w.per {
				within = append(within, at)
			}
		}
		if len(within) >= w.n {
			if at := within[len(within)-w.n].Add(w.per); at.After(free) {
				free = at
			}
		}
	}
	return max(1, int(math.Ceil(free.Sub(now).Seconds())))
}

// teamsEnvelope says what is wrong with a Workflows message envelope, ""
// when nothing.
func teamsEnvelope(body map[string]any) string {
	atts, _ := body["attachments"].([]any)
	if len(atts) == 0 {
		return "attachments: want one Adaptive Card attachment"
	}
	att, _ := atts[0].(map[string]any)
	if att["contentType"] != "application/vnd.microsoft.card.adaptive" {
		return fmt.Sprintf("attachments[0].contentType is %v, want application/vnd.microsoft.card.adaptive", att["contentType"])
	}
	card, _ := att["content"].(map[string]any)
	switch {
	case card["type"] != "AdaptiveCard":
		return "attachments[0].content.type: want AdaptiveCard"
	case card["version"] != "1.4":
		return fmt.Sprintf("attachments[0].content.version is %v, want 1.4", card["version"])
	}
	return teamsCardProblem(card, "attachments[0].content")
}

// teamsElements are the element types of Adaptive Cards 1.4 that Teams
// renders, and teamsActions its action types.
var (
	teamsElements = map[string]bool{"TextBlock": true, "RichTextBlock": true, "Image": true, "ImageSet": true, "FactSet": true,
		"Container": true, "ColumnSet": true, "ActionSet": true, "Table": true, "Media": true}
	teamsActions = map[string]bool{"Action.OpenUrl": true, "Action.Submit": true, "Action.ShowCard": true,
		"Action.ToggleVisibility": true, "Action.Execute": true}
)

// teamsCardProblem says what is wrong with the card at path, "" when nothing: a
// body of known elements, each TextBlock with a text; actions of known
// types, each with a title, an Action.ShowCard with a card that is itself
// right.
func teamsCardProblem(card map[string]any, path string) string {
	elements, _ := card["body"].([]any)
	if len(elements) == 0 {
		return path + ".body is empty"
	}
	for i, e := range elements {
		el, _ := e.(map[string]any)
		kind, _ := el["type"].(string)
		if !teamsElements[kind] {
			return fmt.Sprintf("%s.body[%d].type %q is not an element of Adaptive Cards 1.4", path, i, kind)
		}
		if text, _ := el["text"].(string); kind == "TextBlock" && text == "" {
			return fmt.Sprintf("%s.body[%d]: a TextBlock needs a text", path, i)
		}
	}
	if raw, ok := card["actions"]; ok {
		actions, ok := raw.([]any)
		if !ok {
			return path + ".actions is not an array"
		}
		for i, a := range actions {
			act, _ := a.(map[string]any)
			kind, _ := act["type"].(string)
			at := fmt.Sprintf("%s.actions[%d]", path, i)
			switch title, _ := act["title"].(string); {
			case !teamsActions[kind]:
				return fmt.Sprintf("%s.type %q is not an action of Adaptive Cards 1.4", at, kind)
			case title == "":
				return at + ": an action needs a title"
			case kind == "Action.ShowCard":
				sub, _ := act["card"].(map[string]any)
				if sub["type"] != "AdaptiveCard" {
					return at + ".card: an Action.ShowCard needs a card of type AdaptiveCard"
				}
				if problem := teamsCardProblem(sub, at+".card"); problem != "" {
					return problem
				}
			}
		}
	}
	return ""
}
