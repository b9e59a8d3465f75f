package robottest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// Burst sends the starts of n alarms, named as Alarms names them, through
// sinks of one robot that share their limits, one sink for each of extras
// (its extra option lines), and returns what the fake got: it fails t
// unless the fake took all n, and no more than Pace in any window.
func (k Kit[M]) Burst(t *testing.T, n int, name string, extras ...string) []M {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.Start(t, clk)
	limits := notify.NewLimits(clk)
	sinks := make([]notify.Sink, len(extras))
	for i, extra := range extras {
		sinks[i] = k.Build(t, fmt.Sprintf("ops-%d", i), clk, limits, fake.URL(), extra)
	}
	Alarms(t, clk, n, name, sinks...)
	msgs := fake.Messages()
	if len(msgs) != n {
		t.Fatalf("the robot got %d requests, want %d", len(msgs), n)
	}
	Paced(t, msgs, k.Pace.N, k.Pace.Per)
	return msgs
}

// Paced fails t unless the fake took every one of msgs and no n+1 of them
// arrived within per, on the fake's clock.
func Paced[M notifytest.Message](t testing.TB, msgs []M, n int, per time.Duration) {
	t.Helper()
	for i, m := range msgs {
		if !m.Taken() {
			t.Fatalf("request %d was refused: %s", i, m.Answer())
		}
		if i+n < len(msgs) {
			if gap := msgs[i+n].Arrived().Sub(m.Arrived()); gap < per {
				t.Fatalf("requests %d and %d arrived %s apart: %d requests within %s", i, i+n, gap, n+1, per)
			}
		}
	}
}

// About fails t unless message i of msgs is about alarm fmt.Sprintf(name,
// i), as Alarms names them.
func About[M notifytest.Message](t testing.TB, msgs []M, name string) {
	t.Helper()
	for i, m := range msgs {
		if want := fmt.Sprintf(name, i); !strings.Contains(m.Text(), want) {
			t.Fatalf("request %d is not about %s:\n%s", i, want, m.Text())
		}
	}
}

// Limit is a robot's answer to one message too many, as a vendor's test
// provokes it.
type Limit struct {
	// Fill is how many messages another relay's sink of the robot sends
	// first, using up the robot's window.
	Fill int
	// RetryAfter is how long the refused message waits, and every sink of
	// the robot with it.
	RetryAfter time.Duration
	// Said is what its error says, such as the vendor's code.
	Said []string
}

// Limited checks that a robot's refusal of a message over its limit, when
// another relay used up the robot's window, is retried after l.RetryAfter,
// that the next message of a sibling sink (one sharing the limits) is held
// back that long, and that it is then taken.
func (k Kit[M]) Limited(t *testing.T, l Limit) {
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.Start(t, clk)
	other := k.Build(t, "elsewhere", clk, notify.NewLimits(clk), fake.URL(), "")
	for i := range l.Fill {
		if _, err := Send(t, clk, other, sinktest.Event(fmt.Sprintf("other%02d", i), 2, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := k.Build(t, "ops", clk, limits, fake.URL(), "")
	sibling := k.Build(t, "ops-copy", clk, limits, fake.URL(), "")
	res, err := Send(t, clk, s, sinktest.Event("limited", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != l.RetryAfter {
		t.Fatalf("message %d in the robot's window: retry %v after %s (%v), want a retry after %s", l.Fill+1, res.Retry, res.RetryAfter, err, l.RetryAfter)
	}
	if !strings.HasPrefix(err.Error(), k.Type.Name+` sink "ops": post of limited:start: `) {
		t.Errorf("the error does not start with the sink and the event: %v", err)
	}
	for _, w := range l.Said {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	limitedAt := clk.Now()
	if _, err := Send(t, clk, sibling, sinktest.Event("after", 0, event.Start)); err != nil {
		t.Fatalf("the next message: %v", err)
	}
	msgs := fake.Messages()
	last := msgs[len(msgs)-1]
	if len(msgs) != l.Fill+2 || !last.Taken() || last.Arrived().Sub(limitedAt) != l.RetryAfter {
		t.Fatalf("after the refusal: %d requests, the last answered %s %s after it; want %d, the last taken %s after",
			len(msgs), last.Answer(), last.Arrived().Sub(limitedAt), l.Fill+2, l.RetryAfter)
	}
}

// DeadLetter sends the start of alarm "refused" with s, a sink of k, on clk
// and fails t unless it is dead-lettered at once: its error starts with
// the sink and the event, says each of want, and holds none of secrets.
func (k Kit[M]) DeadLetter(t *testing.T, clk *clock.Fake, s notify.Sink, want []string, secrets ...string) {
	t.Helper()
	res, err := Send(t, clk, s, sinktest.Event("refused", 0, event.Start))
	if err == nil || res.Retry {
		t.Fatalf("retry %v (%v), want a dead letter", res.Retry, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
	if prefix := fmt.Sprintf("%s sink %q: post of refused:start: ", k.Type.Name, s.Name()); !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("the error does not start with the sink and the event: %v", err)
	}
	redacttest.AssertNoSecret(t, secrets, map[string]string{"error": err.Error()})
}

// Answer is an answer a robot may give, and what a sink must make of it.
type Answer struct {
	// Status is its HTTP status (0: 200), RetryAfterHeader its
	// Retry-After, Body its body.
	Status           int
	RetryAfterHeader string
	Body             string
	// Retry and RetryAfter are the Result wanted.
	Retry      bool
	RetryAfter time.Duration
	// WantInErr is what the error says; "" wants no error.
	WantInErr string
}

// Classify checks that a sink posting to a server at path (and query)
// that gives each of answers makes of it what the answer wants.
func (k Kit[M]) Classify(t *testing.T, path string, answers []Answer) {
	for _, c := range answers {
		name := c.Body
		if name == "" {
			name = fmt.Sprint(c.Status)
		}
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if c.RetryAfterHeader != "" {
					w.Header().Set("Retry-After", c.RetryAfterHeader)
				}
				if c.Status != 0 {
					w.WriteHeader(c.Status)
				}
				_, _ = w.Write([]byte(c.Body))
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(sinktest.Epoch)
			s := k.Build(t, "ops", clk, notify.NewLimits(clk), srv.URL+path, "")
			res, err := Send(t, clk, s, sinktest.Event("code", 0, event.Start))
			if (err == nil) != (c.WantInErr == "") || res.Retry != c.Retry || res.RetryAfter != c.RetryAfter {
				t.Fatalf("retry %v after %s (%v), want retry %v after %s", res.Retry, res.RetryAfter, err, c.Retry, c.RetryAfter)
			}
			if err != nil && !strings.Contains(err.Error(), c.WantInErr) {
				t.Errorf("the error does not say %q: %v", c.WantInErr, err)
			}
		})
	}
}

// Refusal is options a sink type refuses at decode, and what the problem
// says.
type Refusal struct {
	Name, YAML string
	Env        map[string]string
	Want       string
}

// Refused checks that typ refuses each of cases saying what it wants,
// without showing any of secrets.
func Refused(t *testing.T, typ sinktype.Type, cases []Refusal, secrets ...string) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(typ, c.YAML, c.Env)
			if err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.Want)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("the problem shows a secret: %v", err)
				}
			}
		})
	}
}

// Fallback is a test of message templates: extra sets a title and a text
// template, the text failing on alarm "boom"; Fine is the message of alarm
// "fine" as the fake reads it, and Default says whether that of "boom"
// fell back to the default text.
type Fallback struct {
	Extra   string
	Fine    string
	Default func(text string) bool
}

// TemplateFails checks that an event whose text template fails is sent with
// the default text, and that TemplateFailed is told which template failed
// on which event, once.
func (k Kit[M]) TemplateFails(t *testing.T, f Fallback) {
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.Start(t, clk)
	var mu sync.Mutex
	var failed []string
	s := k.BuildWith(t, "ops", fake.URL(), f.Extra, sinktype.Deps{Clock: clk, Limits: notify.NewLimits(clk),
		TemplateFailed: func(sink string, ev *event.Event, err error) {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, sink+" "+ev.ID+": "+err.Error())
		}})
	for _, origin := range []string{"fine", "boom"} {
		if _, err := Send(t, clk, s, sinktest.Event(origin, 1, event.Start)); err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
	}
	got := fake.Accepted()
	if len(got) != 2 {
		t.Fatalf("the robot took %d messages, want 2", len(got))
	}
	if got[0].Text() != f.Fine {
		t.Errorf("templated message:\n%s\nwant:\n%s", got[0].Text(), f.Fine)
	}
	if !f.Default(got[1].Text()) {
		t.Errorf("the failing text template did not fall back to the default text:\n%s", got[1].Text())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "ops boom:start: text template") {
		t.Errorf("TemplateFailed was told %q, want the text template's failure on boom:start", failed)
	}
}

// Folds checks a digest of 100 alarms with long names, for a robot that
// folds a list away in its cards (a collapsible panel, a button): its first
// card stays within max bytes (size reads a message's) and folds as many
// alarms as fit; listing the digest as alarm management does (25 at a
// time) posts the others in later cards, so that each alarm is folded in
// exactly one card (folded reads what a card folds away).
func (k Kit[M]) Folds(t *testing.T, max int, size func(M) int, folded func(M) string) {
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.Start(t, clk)
	d := k.Build(t, "ops", clk, notify.NewLimits(clk), fake.URL(), "").(notify.Digester)
	dg := sinktest.DigestOf("big", 100, 5)
	for i := range dg.Items {
		dg.Items[i].StationName = strings.Repeat("Solar Park Nord ", 12)
	}
	mem := sinktest.ShowDigest(t, clk, d, dg)
	shown, _ := strconv.Atoi(mem[sinktype.MemoryDigestShown])
	if shown <= 0 || shown >= 100 {
		t.Fatalf("the card lists %d of 100 alarms, want some but not all of these long ones", shown)
	}
	first := fake.Accepted()[0]
	if size(first) > max || !strings.Contains(first.Text(), fmt.Sprintf("The first %d alarms", shown)) {
		t.Errorf("the card is %d bytes (max %d) and says:\n%s", size(first), max, first.Text())
	}
	sinktest.ListDigests(t, clk, d, dg, mem, sinktest.InLists(dg.Items)...)
	cards := fake.Accepted()
	for _, it := range dg.Items {
		n := 0
		for _, c := range cards {
			n += strings.Count(folded(c), it.DeviceName+",")
		}
		if n != 1 {
			t.Errorf("%s is folded in %d cards, want 1", it.DeviceName, n)
		}
	}
	// One later card per call of ListDigest holding an alarm past those the
	// first card lists.
	if want := 1 + 100/sinktype.DigestListSize - shown/sinktype.DigestListSize; len(cards) != want {
		t.Errorf("%d cards for 100 alarms, the first listing %d; want %d", len(cards), shown, want)
	}
}
