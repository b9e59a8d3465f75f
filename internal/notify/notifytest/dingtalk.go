package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DingTalk answers, as the custom robot API gives them: always HTTP 200,
// with errcode and errmsg in the JSON body.
const (
	DingTalkOK       = 0
	DingTalkBadToken = 300001 // "token is not exist"
	DingTalkBadSign  = 310000 // "sign not match", "invalid timestamp", "keywords not in content"
	DingTalkTooFast  = 130101 // "send too fast, exceed 20 times per minute"
	// DingTalkBadBody answers a body that is not JSON or lacks a field the
	// message type needs ("缺少参数 json"): the code robots answer as
	// seen in public clients' tests; the vendor's table was not at hand.
	DingTalkBadBody = 40035
	// DingTalkBadType answers an unknown msgtype ("不支持的 msgtype").
	DingTalkBadType = 400105
	// DingTalkTooLong answers a message over 20000 bytes ("message too
	// long, exceed 20000 bytes"), as robots answer it.
	DingTalkTooLong     = 460101
	dingTalkMaxText     = 20000
	dingTalkPerMinute   = 20
	dingTalkBlock       = 10 * time.Minute
	dingTalkMaxSkew     = time.Hour
	dingTalkPathAndName = "/robot/send"
)

// DingTalkMessage is one request the fake robot got.
type DingTalkMessage struct {
	Received
	ErrCode int
	ErrMsg  string
}

// Text returns what the message says: the title and text of a markdown
// message, or the content of a text message, one per line.
func (m DingTalkMessage) Text() string {
	md, _ := m.Body["markdown"].(map[string]any)
	title, _ := md["title"].(string)
	text, _ := md["text"].(string)
	if m.Body["msgtype"] == "text" {
		t, _ := m.Body["text"].(map[string]any)
		text, _ = t["content"].(string)
	}
	return strings.TrimPrefix(title+"\n"+text, "\n")
}

// Taken and Answer make m a Message.
func (m DingTalkMessage) Taken() bool    { return m.ErrCode == DingTalkOK }
func (m DingTalkMessage) Answer() string { return fmt.Sprintf("errcode %d %s", m.ErrCode, m.ErrMsg) }

// DingTalk is a fake DingTalk custom robot ("加签" security setting) that
// verifies each request as the vendor documents it, with its own
// implementation: the query carries access_token, timestamp (Unix ms) and
// sign, the URL-encoded base64 of HmacSHA256(key = secret, message =
// timestamp + "\n" + secret); a timestamp more than an hour from now is
// refused. A robot made with no secret takes unsigned messages, as one
// secured by keywords or IP addresses alone does. More than 20 messages in a
// minute blocks the robot for 10 minutes, during which every message is
// refused. The body must be a text or markdown message (markdown with a
// title and a text) of at most 20000 bytes, holding one of the robot's
// keywords when SetKeywords set some.
type DingTalk struct {
	fake[DingTalkMessage]
	token, secret string
	keywords      []string
	accepted      []time.Time
	blocked       time.Time
}

// NewDingTalk starts a fake robot with the access token and signing secret,
// telling the time with now (a fake clock in tests). It is closed when the
// test ends.
func NewDingTalk(t testing.TB, token, secret string, now func() time.Time) *DingTalk {
	t.Helper()
	d := &DingTalk{token: token, secret: secret}
	d.start(t, now, d.serve)
	return d
}

// URL returns the robot's webhook URL with its access token, as DingTalk
// shows it; the sender adds timestamp and sign.
func (d *DingTalk) URL() string {
	return d.server.URL + dingTalkPathAndName + "?access_token=" + d.token
}

// SetKeywords makes the robot take only messages whose title or text holds
// one of words, as its "custom keywords" security setting does.
func (d *DingTalk) SetKeywords(words ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keywords = words
}

func (d *DingTalk) serve(w http.ResponseWriter, r *http.Request) {
	body, decoded, bodyErr := readJSON(r)
	msg := DingTalkMessage{Received: Received{At: d.now(), Body: decoded, Size: len(body)}}
	d.mu.Lock()
	defer d.mu.Unlock()
	q := r.URL.Query()
	signed := d.secret != ""
	switch {
	case r.Method != http.MethodPost || r.URL.Path != dingTalkPathAndName || q.Get("access_token") != d.token:
		msg.ErrCode, msg.ErrMsg = DingTalkBadToken, "token is not exist"
	case signed && !fresh(q.Get("timestamp"), time.UnixMilli, msg.At, dingTalkMaxSkew):
		msg.ErrCode, msg.ErrMsg = DingTalkBadSign, "invalid timestamp"
	case signed && q.Get("sign") != dingTalkSign(d.secret, q.Get("timestamp")):
		msg.ErrCode, msg.ErrMsg = DingTalkBadSign, "sign not match"
	case msg.At.Before(d.blocked) || countWithin(d.accepted, msg.At, time.Minute) >= dingTalkPerMinute:
		if !msg.At.Before(d.blocked) {
			d.blocked = msg.At.Add(dingTalkBlock)
		}
		msg.ErrCode, msg.ErrMsg = DingTalkTooFast, "send too fast, exceed 20 times per minute"
	case bodyErr != nil:
		msg.ErrCode, msg.ErrMsg = DingTalkBadBody, "缺少参数 json"
	default:
		msg.ErrCode, msg.ErrMsg = d.check(msg)
		if msg.ErrCode == DingTalkOK {
			d.accepted = append(d.accepted, msg.At)
		}
	}
	d.messages = append(d.messages, msg)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"errcode": msg.ErrCode, "errmsg": msg.ErrMsg})
}

// check answers the message of an authorised request: its type, its
// fields, its size and the robot's keywords.
func (d *DingTalk) check(msg DingTalkMessage) (int, string) {
	switch msg.Body["msgtype"] {
	case "markdown":
		md, _ := msg.Body["markdown"].(map[string]any)
		if title, _ := md["title"].(string); title == "" {
			return DingTalkBadBody, "缺少参数 markdown.title"
		}
		if text, _ := md["text"].(string); text == "" {
			return DingTalkBadBody, "缺少参数 markdown.text"
		}
	case "text":
		if t, _ := msg.Body["text"].(map[string]any); t == nil || t["content"] == "" {
			return DingTalkBadBody, "缺少参数 text.content"
		}
	default:
		return DingTalkBadType, "不支持的 msgtype"
	}
	text := msg.Text()
	if len(text) > dingTalkMaxText {
		return DingTalkTooLong, "message too long, exceed 20000 bytes"
	}
	if len(d.keywords) > 0 && !slices.ContainsFunc(d.keywords, func(k string) bool { return strings.Contains(text, k) }) {
		return DingTalkBadSign, "keywords not in content"
	}
	return DingTalkOK, "ok"
}

// dingTalkSign is the vendor's signature: sign is URL-encoded in the query,
// and url.Values has already decoded it.
func dingTalkSign(secret, timestamp string) string {
	return hmacBase64(secret, timestamp+"\n"+secret)
}

// fresh reports whether timestamp, a Unix time read with unix, is within
// maxSkew of now, as the vendors check their signed timestamps.
func fresh(timestamp string, unix func(int64) time.Time, now time.Time, maxSkew time.Duration) bool {
	n, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return false
	}
	skew := now.Sub(unix(n))
	return skew <= maxSkew && skew >= -maxSkew
}

// countWithin counts the times within d before now.
func countWithin(times []time.Time, now time.Time, d time.Duration) int {
	n := 0
	for _, at := range times {
		if now.Sub(at) < d {
			n++
		}
	}
	return n
}
