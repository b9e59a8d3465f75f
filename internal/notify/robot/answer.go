package robot

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Attempt is one post of a sink, as a vendor's answer hooks see it.
type Attempt struct {
	// What names the attempt in errors: `dingtalk sink "ops": post of
	// a1:start`.
	What string
	// Event says it is the message of an event (Send, Remind), not one of
	// a storm digest.
	Event bool
	// Signed says the sink signed it: it has a secret.
	Signed bool
	sink   *Sink
}

// Block holds every sink of the robot back for d, as a rate-limit answer
// asks.
func (a *Attempt) Block(d time.Duration) { a.sink.limiter.Block(d) }

// Now returns the time on the sink's clock.
func (a *Attempt) Now() time.Time { return a.sink.clock.Now() }

// CleanText removes the sink's secrets from text, words of the answer an
// error is about to quote: before the text is cut, so that no piece of a
// secret survives the cut.
func (a *Attempt) CleanText(text string) string { return a.sink.poster.CleanText(text) }

// Codes is a vendor's table of the codes of its JSON answer to a 2xx, where
// chat robots say whether they took a message. Code 0 is a delivery for
// every vendor here.
type Codes struct {
	// Vendor names the vendor in errors: "DingTalk answered errcode 310000".
	Vendor string
	// Field is the code's name in the answer: "errcode", "code".
	Field string
	// Read returns the code of an answer and its message; ok is false when
	// the answer is not JSON or holds no code.
	Read func(body []byte) (code int, msg string, ok bool)
	// MaxMsg bounds the message, in bytes, before errors quote it and Why
	// reads it.
	MaxMsg int
	// Known are the codes the sink tells apart.
	Known map[int]Code
	// Unknown says what any other code means: the event is not retried.
	Unknown string
}

// Code is what one answer code means, and what to do about it.
type Code struct {
	// Retry says another attempt can succeed.
	Retry bool
	// Block, when set, says the robot refused the message as too frequent:
	// every sink of it holds back that long, and the attempt is retried
	// after it.
	Block time.Duration
	// Hint says what the code means and what to fix; Why, when set, says it
	// from the answer's message and the attempt instead.
	Hint string
	Why  func(a *Attempt, msg string) string
}

// answer reads the answer to a 2xx of a.
func (c *Codes) answer(a *Attempt, body []byte) (notify.Result, error) {
	code, msg, ok := c.Read(body)
	if !ok {
		return notify.Result{}, fmt.Errorf("%s: the answer is not %s's (no %s in a JSON body): check that url_env holds the %s's webhook URL",
			a.What, c.Vendor, c.Field, a.sink.v.Robot)
	}
	if code == 0 {
		return notify.Result{}, nil
	}
	msg = sinktype.Truncate(a.CleanText(msg), c.MaxMsg)
	said := fmt.Sprintf("%s: %s answered %s %d (%s)", a.What, c.Vendor, c.Field, code, msg)
	k, known := c.Known[code]
	if !known {
		return notify.Result{}, fmt.Errorf("%s: %s", said, c.Unknown)
	}
	hint := k.Hint
	if k.Why != nil {
		hint = k.Why(a, msg)
	}
	res := notify.Result{Retry: k.Retry}
	if k.Block > 0 {
		a.Block(k.Block)
		res = notify.Result{Retry: true, RetryAfter: k.Block}
	}
	return res, fmt.Errorf("%s: %s", said, hint)
}

// ErrCode reads the answer of DingTalk's and WeCom's robots: errcode and
// errmsg in a JSON object.
func ErrCode(body []byte) (code int, msg string, ok bool) {
	var ans struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if json.Unmarshal(body, &ans) != nil || ans.ErrCode == nil {
		return 0, "", false
	}
	return *ans.ErrCode, ans.ErrMsg, true
}
