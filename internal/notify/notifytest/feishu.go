package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	feishuMaxBody    = 20 << 10
	feishuMaxSkew    = time.Hour
	feishuHookPath   = "/open-apis/bot/v2/hook/"
)

// FeishuMessage is one request the fake bot got.
type FeishuMessage struct {
	At   time.Time
	Body map[string]any
	Size int
	Code int
	Msg  string
}

// Feishu is a fake Feishu (or Lark) custom bot with signature verification,
// verifying each request as the vendor documents it, with its own
// implementation: the JSON body carries timestamp (Unix seconds, a string)
// and sign, the base64 of HmacSHA256(key = timestamp + "\n" + secret,
// message = empty); a timestamp more than an hour from now is refused.
type Feishu struct {
	server        *httptest.Server
	token, secret string
	now           func() time.Time

	mu       sync.Mutex
	messages []FeishuMessage
	accepted []time.Time
}

// NewFeishu starts a fake bot whose webhook ends in token, verifying with
// secret and telling the time with now. It is closed when the test ends.
func NewFeishu(t testing.TB, token, secret string, now func() time.Time) *Feishu {
	t.Helper()
	f := &Feishu{token: token, secret: secret, now: now}
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

// URL returns the bot's webhook URL.
func (f *Feishu) URL() string { return f.server.URL + feishuHookPath + f.token }

// Messages returns every request so far, with the answer each got.
func (f *Feishu) Messages() []FeishuMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FeishuMessage(nil), f.messages...)
}

func (f *Feishu) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	msg := FeishuMessage{At: f.now(), Size: len(body)}
	f.mu.Lock()
	defer f.mu.Unlock()
	var fields struct {
		Timestamp string `json:"timestamp"`
		Sign      string `json:"sign"`
	}
	switch {
	case r.Method != http.MethodPost || strings.TrimPrefix(r.URL.Path, feishuHookPath) != f.token:
		w.WriteHeader(http.StatusNotFound)
		msg.Code, msg.Msg = http.StatusNotFound, "not found"
		f.messages = append(f.messages, msg)
		return
	case len(body) > feishuMaxBody:
		msg.Code, msg.Msg = FeishuBadRequest, "request body exceeds 20 KB"
	case json.Unmarshal(body, &msg.Body) != nil || json.Unmarshal(body, &fields) != nil:
		msg.Code, msg.Msg = FeishuBadRequest, "Bad Request"
	case !fresh(fields.Timestamp, func(n int64) time.Time { return time.Unix(n, 0) }, msg.At, feishuMaxSkew) || fields.Sign != feishuSign(f.secret, fields.Timestamp):
		msg.Code, msg.Msg = FeishuBadSign, "sign match fail or timestamp is not within one hour from current time"
	case countWithin(f.accepted, msg.At, time.Second) >= 5 || countWithin(f.accepted, msg.At, time.Minute) >= 100:
		msg.Code, msg.Msg = FeishuTooFast, "frequency limited"
	default:
		msg.Msg = "success"
		f.accepted = append(f.accepted, msg.At)
	}
	f.messages = append(f.messages, msg)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"code": msg.Code, "msg": msg.Msg, "data": map[string]any{}})
}

// feishuSign is the vendor's signature: the HMAC key is the string to sign
// and the message is empty.
func feishuSign(secret, timestamp string) string {
	mac := hmac.New(sha256.New, []byte(timestamp+"\n"+secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
