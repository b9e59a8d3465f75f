package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Feishu / Lark custom bot answers: HTTP 200 with code and msg in the JSON
// body.
const (
	FeishuOK = 0
	// FeishuBadSign is the vendor's answer to a wrong signature or a
	// timestamp more than an hour from now.
	FeishuBadSign = 19021
	// FeishuTooFast answers more than 5 messages in a second or 100 in a
	// minute. The code is the one the vendor's custom-bot documentation
	// gives for its frequency limit, as we know it; check it against a real
	// bot before relying on its value.
	FeishuTooFast = 11232
	// FeishuBadRequest answers a body that is not JSON or is over 20 KB.
	FeishuBadRequest = 9499
	// FeishuBadToken answers a webhook whose token names no bot ("param
	// invalid: incoming webhook access token invalid"), with HTTP 200, as
	// bots answer it in public clients' tests; the vendor's page gives no
	// table of it.
	FeishuBadToken = 19001
	// FeishuBadParam answers a message the bot cannot take: an unknown
	// msg_type, an interactive message without a card ("param invalid:
	// ..."), as public clients' tests show it; the fake's reading.
	FeishuBadParam = 19002
	feishuMaxBody  = 20 << 10
	feishuMaxSkew  = time.Hour
	feishuHookPath = "/open-apis/bot/v2/hook/"
)

// FeishuMessage is one request the fake bot got.
type FeishuMessage struct {
	Received
	Code int
	Msg  string
}

// Text returns what the message says: for an interactive card, its header's
// title and the content of each element (a div's text and fields, a
// markdown, a note's texts), one a line; for a text message, its text.
func (m FeishuMessage) Text() string {
	if m.Body["msg_type"] == "text" {
		c, _ := m.Body["content"].(map[string]any)
		s, _ := c["text"].(string)
		return s
	}
	card, _ := m.Body["card"].(map[string]any)
	var lines []string
	if h, _ := card["header"].(map[string]any); h != nil {
		title, _ := h["title"].(map[string]any)
		if s, _ := title["content"].(string); s != "" {
			lines = append(lines, s)
		}
	}
	elements, _ := card["elements"].([]any)
	for _, e := range elements {
		lines = append(lines, feishuTexts(e)...)
	}
	return strings.Join(lines, "\n")
}

// Taken and Answer make m a Message.
func (m FeishuMessage) Taken() bool    { return m.Code == FeishuOK }
func (m FeishuMessage) Answer() string { return fmt.Sprintf("code %d %s", m.Code, m.Msg) }

// Panels returns what the card's collapsible panels hold, one line a text,
// "" when it has none.
func (m FeishuMessage) Panels() string {
	card, _ := m.Body["card"].(map[string]any)
	elements, _ := card["elements"].([]any)
	var lines []string
	for _, e := range elements {
		if el, _ := e.(map[string]any); el["tag"] == "collapsible_panel" {
			lines = append(lines, feishuTexts(el["elements"])...)
		}
	}
	return strings.Join(lines, "\n")
}

// Template returns the colour of an interactive card's header.
func (m FeishuMessage) Template() string {
	card, _ := m.Body["card"].(map[string]any)
	h, _ := card["header"].(map[string]any)
	s, _ := h["template"].(string)
	return s
}

// feishuTexts returns the "content" strings of a card element and of the
// elements and texts it holds.
func feishuTexts(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["content"].(string); ok && s != "" {
			out = append(out, s)
		}
		for _, k := range []string{"text", "fields", "elements"} {
			if sub, ok := v[k]; ok {
				out = append(out, feishuTexts(sub)...)
			}
		}
	case []any:
		for _, e := range v {
			out = append(out, feishuTexts(e)...)
		}
	}
	return out
}

// Feishu is a fake Feishu (or Lark) custom bot with signature verification,
// verifying each request as the vendor documents it, with its own
// implementation: the JSON body carries timestamp (Unix seconds, a string)
// and sign, the base64 of HmacSHA256(key = timestamp + "\n" + secret,
// message = empty); a timestamp more than an hour from now is refused. A bot
// made with no secret takes unsigned messages. The message must be of a
// known msg_type, and an interactive one must hold a card with elements.
type Feishu struct {
	fake[FeishuMessage]
	token, secret string
	accepted      []time.Time
}

// NewFeishu starts a fake bot whose webhook ends in token, verifying with
// secret and telling the time with now. It is closed when the test ends.
func NewFeishu(t testing.TB, token, secret string, now func() time.Time) *Feishu {
	t.Helper()
	f := &Feishu{token: token, secret: secret}
	f.start(t, now, f.serve)
	return f
}

// URL returns the bot's webhook URL.
func (f *Feishu) URL() string { return f.server.URL + feishuHookPath + f.token }

func (f *Feishu) serve(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	msg := FeishuMessage{Received: Received{At: f.now(), Size: len(body)}}
	f.mu.Lock()
	defer f.mu.Unlock()
	var fields struct {
		Timestamp string `json:"timestamp"`
		Sign      string `json:"sign"`
	}
	token, isHook := strings.CutPrefix(r.URL.Path, feishuHookPath)
	switch {
	case r.Method != http.MethodPost || !isHook:
		w.WriteHeader(http.StatusNotFound)
		msg.Code, msg.Msg = http.StatusNotFound, "not found"
		f.messages = append(f.messages, msg)
		return
	case token != f.token:
		msg.Code, msg.Msg = FeishuBadToken, "param invalid: incoming webhook access token invalid"
	case len(body) > feishuMaxBody:
		msg.Code, msg.Msg = FeishuBadRequest, "request body exceeds 20 KB"
	case json.Unmarshal(body, &msg.Body) != nil || json.Unmarshal(body, &fields) != nil:
		msg.Code, msg.Msg = FeishuBadRequest, "Bad Request"
	case f.secret != "" && (!fresh(fields.Timestamp, func(n int64) time.Time { return time.Unix(n, 0) }, msg.At, feishuMaxSkew) || fields.Sign != feishuSign(f.secret, fields.Timestamp)):
		msg.Code, msg.Msg = FeishuBadSign, "sign match fail or timestamp is not within one hour from current time"
	case countWithin(f.accepted, msg.At, time.Second) >= 5 || countWithin(f.accepted, msg.At, time.Minute) >= 100:
		msg.Code, msg.Msg = FeishuTooFast, "frequency limited"
	case feishuBadParam(msg.Body) != "":
		msg.Code, msg.Msg = FeishuBadParam, "param invalid: "+feishuBadParam(msg.Body)
	default:
		msg.Msg = "success"
		f.accepted = append(f.accepted, msg.At)
	}
	f.messages = append(f.messages, msg)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"code": msg.Code, "msg": msg.Msg, "data": map[string]any{}})
}

// feishuBadParam names what the bot cannot take in body, "" when nothing.
func feishuBadParam(body map[string]any) string {
	switch body["msg_type"] {
	case "text", "post", "image", "share_chat":
		return ""
	case "interactive":
		card, _ := body["card"].(map[string]any)
		elements, _ := card["elements"].([]any)
		if len(elements) == 0 {
			return "card has no elements"
		}
		return feishuElements(elements, "card.elements", 0)
	}
	return "msg_type"
}

// feishuTags are the element tags of message cards in the JSON 1.0
// structure, and feishuContainers those that hold elements of their own.
var (
	feishuTags = map[string]bool{"div": true, "markdown": true, "hr": true, "img": true, "note": true, "action": true,
		"column_set": true, "collapsible_panel": true, "form": true, "person_list": true, "chart": true, "table": true}
	feishuContainers = map[string]bool{"column_set": true, "collapsible_panel": true, "form": true}
)

// feishuElements names what is wrong with a card's elements at path,
// nested depth containers deep, "" when nothing: an unknown tag; a
// collapsible_panel without a header title (plain_text or markdown) or
// without elements, or holding a form; containers nested more than five
// deep. These are the rules of the JSON 1.0 collapsible panel as the
// vendor's component guide gives them.
func feishuElements(elements []any, path string, depth int) string {
	if depth > 5 {
		return path + ": containers nest more than five deep"
	}
	for i, e := range elements {
		el, _ := e.(map[string]any)
		tag, _ := el["tag"].(string)
		at := fmt.Sprintf("%s[%d]", path, i)
		if !feishuTags[tag] {
			return fmt.Sprintf("%s: unknown tag %q", at, tag)
		}
		if tag != "collapsible_panel" {
			continue
		}
		header, _ := el["header"].(map[string]any)
		title, _ := header["title"].(map[string]any)
		if t := title["tag"]; (t != "plain_text" && t != "markdown") || title["content"] == "" || title["content"] == nil {
			return at + ".header.title: a collapsible_panel needs a plain_text or markdown title"
		}
		inner, _ := el["elements"].([]any)
		if len(inner) == 0 {
			return at + ".elements: a collapsible_panel needs elements"
		}
		for _, sub := range inner {
			if m, _ := sub.(map[string]any); m["tag"] == "form" {
				return at + ": a collapsible_panel cannot hold a form"
			}
		}
		if problem := feishuElements(inner, at+".elements", depth+1); problem != "" {
			return problem
		}
	}
	return ""
}

// feishuSign is the vendor's signature: the HMAC key is the string to sign
// and the message is empty.
func feishuSign(secret, timestamp string) string {
	return hmacBase64(timestamp+"\n"+secret, "")
}
