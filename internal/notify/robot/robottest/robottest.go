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
	"strings"
	"testing"

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
	// Secret is the robot's signing secret ("" for none).
	Secret string
	// Options, when set, returns the options of a sink posting to hook,
	// plus extra lines, and the variables they name, for a vendor whose
	// options are not url_env and secret_env.
	Options func(hook, extra string) (string, map[string]string)
	// Start starts the vendor's fake on clk.
	Start func(t *testing.T, clk *clock.Fake) Robot[M]
	// Pace is the fake's limit, as the vendor documents it, which no burst
	// may exceed.
	Pace notify.Window
}

// options returns the options of a sink of k posting to hook: by default,
// from the variables named after the sink type, such as DINGTALK_URL.
func (k Kit[M]) options(hook, extra string) (string, map[string]string) {
	if k.Options != nil {
		return k.Options(hook, extra)
	}
	return Options(strings.ToUpper(k.Type.Name), hook, k.Secret, extra)
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

// Robot is a running fake robot of internal/notify/notifytest.
type Robot[M notifytest.Message] interface {
	// URL returns its webhook URL.
	URL() string
	// Messages returns every request it got, in order of arrival, and
	// Accepted those it took.
	Messages() []M
	Accepted() []M
}

// Vendor returns the sinktest.Vendor of the conformance suite for the
// fake, whose sinks have extra option lines.
func (k Kit[M]) Vendor(extra string) func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
	return func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
		fake := k.Start(t, clk)
		return sinktest.Vendor{
			URL: sinktest.Origin(fake.URL()),
			Options: func(base string) (string, map[string]string) {
				return k.options(sinktest.Rebase(fake.URL(), base), extra)
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
	Fake  Robot[M]
	Sink  notify.Sink
}

// Rig starts the fake on a fake clock and builds the sink "ops" posting to
// it, with extra option lines.
func (k Kit[M]) Rig(t *testing.T, extra string) *Rig[M] {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	fake := k.Start(t, clk)
	return &Rig[M]{t: t, Clock: clk, Fake: fake, Sink: k.Build(t, "ops", clk, notify.NewLimits(clk), fake.URL(), extra)}
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
