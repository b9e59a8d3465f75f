// Package robottest holds the tests that every robot sink type shares
// (internal/notify/robot), which each vendor's package runs against its
// fake robot (internal/notify/notifytest): a burst kept to the robot's pace,
// a rate-limit answer that every sink of the robot waits out, each answer
// classified, options refused at decode without a secret shown, a failing
// template replaced by the default, a digest folded into cards. The
// vendor's package keeps what is its own: its answer codes as its docs give
// them, its payload, its signature.
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
)

// Kit is how the tests of one vendor make its sinks and its fake robot,
// whose requests are of type M.
type Kit[M notifytest.Message] struct {
	// Type is the sink type.
	Type sinktype.Type
	// Env names the variables of a sink's options, as Options names them,
	// and Secret is the robot's signing secret ("" for none).
	Env, Secret string
	// Options, when set, returns the options of a sink posting to hook,
	// plus extra lines, and the variables they name, for a vendor whose
	// options are not url_env and secret_env.
	Options func(hook, extra string) (string, map[string]string)
	// Start starts the vendor's fake on clk: it returns its webhook URL, and
	// what returns every request it got, in order of arrival.
	Start func(t *testing.T, clk *clock.Fake) (hook string, messages func() []M)
	// Pace is the fake's limit, as the vendor documents it, which no burst
	// may exceed.
	Pace notify.Window
}

// options returns the options of a sink of k posting to hook.
func (k Kit[M]) options(hook, extra string) (string, map[string]string) {
	if k.Options != nil {
		return k.Options(hook, extra)
	}
	return Options(k.Env, hook, k.Secret, extra)
}

// start starts the fake on clk.
func (k Kit[M]) start(t *testing.T, clk *clock.Fake) Fake[M] {
	hook, messages := k.Start(t, clk)
	return Fake[M]{Hook: hook, Messages: messages}
}

// Options are the options of a sink posting to hook, read from the
// variables NAME_URL and, unless secret is empty, NAME_SECRET, plus extra
// lines; and those variables.
func Options(name, hook, secret, extra string) (string, map[string]string) {
	env := map[string]string{name + "_URL": hook}
	text := "url_env: " + name + "_URL\n"
	if secret != "" {
		env[name+"_SECRET"] = secret
		text += "secret_env: " + name + "_SECRET\n"
	}
	return text + extra, env
}

// Fake is a running fake robot.
type Fake[M notifytest.Message] struct {
	// Hook is its webhook URL.
	Hook string
	// Messages returns every request it got, in order of arrival.
	Messages func() []M
}

// Accepted returns the messages the fake took, in order of arrival.
func (f Fake[M]) Accepted() []M {
	var out []M
	for _, m := range f.Messages() {
		if m.Taken() {
			out = append(out, m)
		}
	}
	return out
}

// Vendor returns the sinktest.Vendor of the conformance suite for the
// fake, whose sinks have extra option lines.
func (k Kit[M]) Vendor(extra string) func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
	return func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
		fake := k.start(t, clk)
		return sinktest.Vendor{
			URL: sinktest.Origin(fake.Hook),
			Options: func(base string) (string, map[string]string) {
				return k.options(sinktest.Rebase(fake.Hook, base), extra)
			},
			Received: func() []string { return sinktest.Texts(fake.Accepted()) },
		}
	}
}

// Rig is one sink of a vendor's on a fake clock, and the fake robot it
// posts to.
type Rig[M notifytest.Message] struct {
	t     *testing.T
	Clock *clock.Fake
	Fake  Fake[M]
	Sink  notify.Sink
}

// Rig starts the fake on a fake clock and builds the sink "ops" posting to
// it, with extra option lines.
func (k Kit[M]) Rig(t *testing.T, extra string) *Rig[M] {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.start(t, clk)
	return &Rig[M]{t: t, Clock: clk, Fake: fake, Sink: k.Build(t, "ops", clk, notify.NewLimits(clk), fake.Hook, extra)}
}

// Send makes one attempt at ev, without memory.
func (r *Rig[M]) Send(ev event.Event) (notify.Result, error) {
	r.t.Helper()
	return Send(r.t, r.Clock, r.Sink, ev)
}

// SendAll sends evs in turn, failing the test on an error.
func (r *Rig[M]) SendAll(evs ...event.Event) {
	r.t.Helper()
	SendAll(r.t, r.Clock, r.Sink, evs...)
}

// Only sends ev and returns the message the fake took, failing the test
// unless it took exactly one.
func (r *Rig[M]) Only(ev event.Event) M {
	r.t.Helper()
	if _, err := r.Send(ev); err != nil {
		r.t.Fatal(err)
	}
	got := r.Fake.Accepted()
	if len(got) != 1 {
		r.t.Fatalf("the robot took %d messages, want 1", len(got))
	}
	return got[0]
}

// Digest posts dg, then lists each of lists, as alarm management does,
// failing the test on an error.
func (r *Rig[M]) Digest(dg *notify.Digest, lists ...[]notify.DigestItem) {
	r.t.Helper()
	d := r.Sink.(notify.Digester)
	sinktest.ListDigests(r.t, r.Clock, d, dg, sinktest.ShowDigest(r.t, r.Clock, d, dg), lists...)
}

// Build decodes the options of a sink posting to hook, plus extra lines,
// and builds it as name on clk, pacing with limits (shared by the sinks of
// one relay).
func (k Kit[M]) Build(t testing.TB, name string, clk *clock.Fake, limits *notify.Limits, hook, extra string) notify.Sink {
	t.Helper()
	return k.BuildWith(t, name, hook, extra, sinktype.Deps{Clock: clk, Limits: limits})
}

// BuildWith is Build with deps.
func (k Kit[M]) BuildWith(t testing.TB, name, hook, extra string, deps sinktype.Deps) notify.Sink {
	t.Helper()
	text, env := k.options(hook, extra)
	return sinktest.Build(t, k.Type, name, text, env, deps)
}

// Send makes one attempt at ev, without memory.
func Send(t testing.TB, clk *clock.Fake, s notify.Sink, ev event.Event) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, nil)
}

// SendAll makes one attempt at each of evs in turn, failing t on an error.
func SendAll(t testing.TB, clk *clock.Fake, s notify.Sink, evs ...event.Event) {
	t.Helper()
	for _, ev := range evs {
		if _, err := Send(t, clk, s, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// Shades returns the starts of alarms c0 to c3 at levels 0 to 3, then the
// end of c0 and the cancellation of c1: what a vendor's colours tell apart.
func Shades() []event.Event {
	var evs []event.Event
	for level := range 4 {
		evs = append(evs, sinktest.Event(fmt.Sprintf("c%d", level), level, event.Start))
	}
	return append(evs, sinktest.Event("c0", 0, event.End), sinktest.Event("c1", 1, event.Invalid))
}

// Alarms sends the starts of n alarms, alarm i named fmt.Sprintf(name, i)
// at level i%4, through sinks in turn, failing t on any error.
func Alarms(t testing.TB, clk *clock.Fake, n int, name string, sinks ...notify.Sink) {
	t.Helper()
	for i := range n {
		s := sinks[i%len(sinks)]
		if _, err := Send(t, clk, s, sinktest.Event(fmt.Sprintf(name, i), i%4, event.Start)); err != nil {
			t.Fatalf("alarm %d through %s: %v", i, s.Name(), err)
		}
	}
}

// Burst sends the starts of n alarms, named as Alarms names them, through
// sinks of one robot that share their limits, one sink for each of extras
// (its extra option lines), and returns what the fake got: it fails t
// unless the fake took all n, and no more than Pace in any window.
func (k Kit[M]) Burst(t *testing.T, n int, name string, extras ...string) []M {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.start(t, clk)
	limits := notify.NewLimits(clk)
	sinks := make([]notify.Sink, len(extras))
	for i, extra := range extras {
		sinks[i] = k.Build(t, fmt.Sprintf("ops-%d", i), clk, limits, fake.Hook, extra)
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
	fake := k.start(t, clk)
	other := k.Build(t, "elsewhere", clk, notify.NewLimits(clk), fake.Hook, "")
	for i := range l.Fill {
		if _, err := Send(t, clk, other, sinktest.Event(fmt.Sprintf("other%02d", i), 2, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := k.Build(t, "ops", clk, limits, fake.Hook, "")
	sibling := k.Build(t, "ops-copy", clk, limits, fake.Hook, "")
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
	notifytest.AssertNoSecret(t, secrets, map[string]string{"error": err.Error()})
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
	fake := k.start(t, clk)
	var mu sync.Mutex
	var failed []string
	s := k.BuildWith(t, "ops", fake.Hook, f.Extra, sinktype.Deps{Clock: clk, Limits: notify.NewLimits(clk),
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
	fake := k.start(t, clk)
	d := k.Build(t, "ops", clk, notify.NewLimits(clk), fake.Hook, "").(notify.Digester)
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
