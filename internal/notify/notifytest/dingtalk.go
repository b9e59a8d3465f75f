package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// DingTalk answers, as the custom robot API gives them: always HTTP 200,
// with errcode and errmsg in the JSON body.
const (
	DingTalkOK          = 0
	DingTalkBadToken    = 300001 // "token is not exist"
	DingTalkBadSign     = 310000 // "sign not match", "invalid timestamp", "keywords not in content"
	DingTalkTooFast     = 130101 // "send too fast, exceed 20 times per minute"
	dingTalkPerMinute   = 20
	dingTalkBlock       = 10 * time.Minute
	dingTalkMaxSkew     = time.Hour
	dingTalkPathAndName = "/robot/send"
)

// DingTalkMessage is one request the fake robot got.
type DingTalkMessage struct {
	At      time.Time
	Body    map[string]any
	ErrCode int
	ErrMsg  string
}

// DingTalk is a fake DingTalk custom robot ("加签" security setting) that
// verifies each request as the vendor documents it, with its own
// implementation: the query carries access_token, timestamp (Unix ms) and
// sign, the URL-encoded base64 of HmacSHA256(key = secret, message =
// timestamp + "\n" + secret); a timestamp more than an hour from now is
// refused. More than 20 messages in a minute blocks the robot for 10
// minutes, during which every message is refused.
type DingTalk struct {
	server        *httptest.Server
	token, secret string
	now           func() time.Time

	mu       sync.Mutex
	messages []DingTalkMessage
	accepted []time.Time
	blocked  time.Time
}

// NewDingTalk starts a fake robot with the access token and signing secret,
// telling the time with now (a fake clock in tests). It is closed when the
// test ends.
func NewDingTalk(t testing.TB, token, secret string, now func() time.Time) *DingTalk {
	t.Helper()
	d := &DingTalk{token: token, secret: secret, now: now}
	d.server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.server.Close)
	return d
}

// URL returns the robot's webhook URL with its access token, as DingTalk
// shows it; the sender adds timestamp and sign.
func (d *DingTalk) URL() string {
	return d.server.URL + dingTalkPathAndName + "?access_token=" + d.token
}

// Messages returns every request so far, with the answer each got.
func (d *DingTalk) Messages() []DingTalkMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DingTalkMessage(nil), d.messages...)
}

func (d *DingTalk) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msg := DingTalkMessage{At: d.now()}
	_ = json.Unmarshal(body, &msg.Body)
	d.mu.Lock()
	defer d.mu.Unlock()
	q := r.URL.Query()
	switch {
	case r.Method != http.MethodPost || r.URL.Path != dingTalkPathAndName || q.Get("access_token") != d.token:
		msg.ErrCode, msg.ErrMsg = DingTalkBadToken, "token is not exist"
	case !fresh(q.Get("timestamp"), time.UnixMilli, msg.At, dingTalkMaxSkew):
		msg.ErrCode, msg.ErrMsg = DingTalkBadSign, "invalid timestamp"
	case q.Get("sign") != dingTalkSign(d.secret, q.Get("timestamp")):
		msg.ErrCode, msg.ErrMsg = DingTalkBadSign, "sign not match"
	case msg.At.Before(d.blocked) || countWithin(d.accepted, msg.At, time.Minute) >= dingTalkPerMinute:
		if !msg.At.Before(d.blocked) {
			d.blocked = msg.At.Add(dingTalkBlock)
		}
		msg.ErrCode, msg.ErrMsg = DingTalkTooFast, "send too fast, exceed 20 times per minute"
	default:
		msg.ErrMsg = "ok"
		d.accepted = append(d.accepted, msg.At)
	}
	d.messages = append(d.messages, msg)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"errcode": msg.ErrCode, "errmsg": msg.ErrMsg})
}

// dingTalkSign is the vendor's signature: sign is URL-encoded in the query,
// and url.Values has already decoded it.
func dingTalkSign(secret, timestamp string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "\n" + secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
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
