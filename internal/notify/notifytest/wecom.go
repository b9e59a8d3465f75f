package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// WeCom (企业微信) group robot answers: HTTP 200 with errcode and errmsg in
// the JSON body, as the vendor's global error codes give them.
const (
	WeComOK = 0
	// WeComBadKey answers a webhook URL whose key no robot has ("invalid
	// webhook url").
	WeComBadKey = 93000
	// WeComTooFast answers more than 20 messages in a minute ("api freq out
	// of limit").
	WeComTooFast = 45009
	// WeComBadParam answers a parameter out of bounds, such as markdown
	// content over 4096 bytes ("markdown.content exceed max length 4096").
	WeComBadParam = 40058
	// WeComBadType answers an unknown msgtype ("invalid message type").
	WeComBadType = 40008
	// WeComEmpty answers an empty content ("empty content"); the vendor
	// documents it for text messages, and we assume it for markdown.
	WeComEmpty       = 44004
	weComPerMinute   = 20
	weComMaxMarkdown = 4096
	weComMaxText     = 2048
	weComHookPath    = "/cgi-bin/webhook/send"
)

// WeComMessage is one request the fake robot got.
type WeComMessage struct {
	Received
	// Content is the markdown or text content.
	Content string
	ErrCode int
	ErrMsg  string
}

// Taken, Answer and Text make m a Message.
func (m WeComMessage) Taken() bool    { return m.ErrCode == WeComOK }
func (m WeComMessage) Answer() string { return fmt.Sprintf("errcode %d %s", m.ErrCode, m.ErrMsg) }
func (m WeComMessage) Text() string   { return m.Content }

// WeCom is a fake WeCom group robot. It checks each request as the vendor
// documents its webhook: POST /cgi-bin/webhook/send?key=KEY with a JSON body
// whose msgtype is markdown (content at most 4096 bytes) or text (content
// at most 2048 bytes); a wrong key is answered 93000, and more than 20
// accepted messages in a minute 45009.
type WeCom struct {
	fake[WeComMessage]
	key      string
	accepted []time.Time
}

// NewWeCom starts a fake robot with the webhook key, telling the time with
// now (a fake clock in tests). It is closed when the test ends.
func NewWeCom(t testing.TB, key string, now func() time.Time) *WeCom {
	t.Helper()
	w := &WeCom{key: key}
	w.start(t, now, w.serve)
	return w
}

// URL returns the robot's webhook URL with its key, as WeCom shows it.
func (w *WeCom) URL() string { return w.server.URL + weComHookPath + "?key=" + w.key }

func (w *WeCom) serve(rw http.ResponseWriter, r *http.Request) {
	body, decoded, bodyErr := readJSON(r)
	msg := WeComMessage{Received: Received{At: w.now(), Body: decoded, Size: len(body)}}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case r.Method != http.MethodPost || r.URL.Path != weComHookPath || r.URL.Query().Get("key") != w.key:
		msg.ErrCode, msg.ErrMsg = WeComBadKey, "invalid webhook url"
	case bodyErr != nil:
		msg.ErrCode, msg.ErrMsg = WeComBadParam, "Warning: wrong json format. invalid Request Parameter"
	default:
		msg.Content, msg.ErrCode, msg.ErrMsg = w.check(msg.Body)
		if msg.ErrCode == WeComOK {
			if countWithin(w.accepted, msg.At, time.Minute) >= weComPerMinute {
				msg.ErrCode, msg.ErrMsg = WeComTooFast, "api freq out of limit"
			} else {
				w.accepted = append(w.accepted, msg.At)
			}
		}
	}
	w.messages = append(w.messages, msg)
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"errcode": msg.ErrCode, "errmsg": msg.ErrMsg})
}

// check returns the content of a message body and the answer to it.
func (w *WeCom) check(body map[string]any) (string, int, string) {
	kind, _ := body["msgtype"].(string)
	limit := 0
	switch kind {
	case "markdown":
		limit = weComMaxMarkdown
	case "text":
		limit = weComMaxText
	default:
		return "", WeComBadType, "invalid message type"
	}
	part, _ := body[kind].(map[string]any)
	content, _ := part["content"].(string)
	switch {
	case content == "":
		return "", WeComEmpty, "empty content"
	case len(content) > limit:
		return content, WeComBadParam, kind + ".content exceed max length " + strconv.Itoa(limit) + ". invalid Request Parameter"
	}
	return content, WeComOK, "ok"
}
