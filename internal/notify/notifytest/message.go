package notifytest

import "time"

// Message is one request a fake robot got (DingTalk, WeCom, Feishu, Teams,
// PagerDuty), as the tests that every robot sink shares read it
// (internal/notify/robot/robottest).
type Message interface {
	// Arrived is when the fake got the request, on its clock.
	Arrived() time.Time
	// Taken says the fake took the message: it answered success.
	Taken() bool
	// Answer is the fake's answer, as a failing test reports it.
	Answer() string
	// Text is what the message says.
	Text() string
}

// taken returns those of msgs the fake took, in order of arrival.
func taken[M Message](msgs []M) []M {
	var out []M
	for _, m := range msgs {
		if m.Taken() {
			out = append(out, m)
		}
	}
	return out
}
