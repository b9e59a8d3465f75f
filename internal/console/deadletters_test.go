package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/store"
)

// deadLetterSite is a console on f's store, logged in as an administrator
// and as a viewer.
type deadLetterSite struct {
	*site
	f             *delivertest.Fixture
	admin, viewer *http.Client
}

func newDeadLetterSite(t *testing.T, f *delivertest.Fixture) *deadLetterSite {
	t.Helper()
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken, Store: f.Store}, false)
	d := &deadLetterSite{site: s, f: f, admin: s.browser(), viewer: s.browser()}
	s.login(d.admin, adminToken, "li.wei")
	s.login(d.viewer, viewToken, "")
	return d
}

// page returns the Dead letters page as the administrator sees it.
func (d *deadLetterSite) page(query string) string {
	d.t.Helper()
	resp, page := d.do(d.admin, "GET", "/console/deadletters"+query, nil, nil)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET /console/deadletters%s: %s\n%s", query, resp.Status, page)
	}
	return page
}

// post clicks the administrator's button of path on the page and returns
// the message the next page shows.
func (d *deadLetterSite) post(path string, form url.Values) string {
	d.t.Helper()
	page := d.page("")
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", csrf(d.t, page))
	resp, body := d.do(d.admin, "POST", path, form, map[string]string{"Origin": d.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		d.t.Fatalf("POST %s: %s, want 303 back to the page: %s", path, resp.Status, body)
	}
	resp, page = d.do(d.admin, "GET", resp.Header.Get("Location"), nil, nil)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET after POST %s: %s", path, resp.Status)
	}
	m := regexp.MustCompile(`<p class="flash" role="status">([^<]*)</p>`).FindStringSubmatch(page)
	if m == nil {
		d.t.Fatalf("POST %s left no message:\n%s", path, page)
	}
	return m[1]
}

// deadStart dead-letters the start of alarm origin waiting in sink's
// outbox, and returns its dead letter's number.
func deadStart(t *testing.T, f *delivertest.Fixture, sink, origin, reason string) {
	t.Helper()
	es, err := f.Store.Pending(sink, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.EventID == origin+":start" {
			if err := f.Store.DeadLetter(e, reason); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no start of %s waiting at %s", origin, sink)
}

// seqOf returns the number of the dead letter of event id at sink.
func seqOf(t *testing.T, f *delivertest.Fixture, sink, id string) string {
	t.Helper()
	ds, err := f.Store.FindDeadLetters(store.DeadLetterFilter{Sink: sink, EventID: id})
	if err != nil || len(ds) != 1 {
		t.Fatalf("dead letters of %s at %s: %+v, %v; want one", id, sink, ds, err)
	}
	return strconv.FormatUint(ds[0].Seq, 10)
}

// TestConsoleDeadLettersReplayAndDropFollowThePairingRules: a replay or a
// drop from the page does what relay deadletters replay --sink --event
// does. The Replay of a parked end puts its start back first, then the end;
// an end whose start was pruned is refused with the store's reason and
// stays listed, then goes with Drop; an alarm with an entry still waiting
// is refused until the entry is delivered.
func TestConsoleDeadLettersReplayAndDropFollowThePairingRules(t *testing.T) {
	f := delivertest.New(t, "hook")
	// lone's start is pruned after the retention; its end, parked later,
	// stays.
	lone := f.Start("lone", 0)
	deadStart(t, f, "hook", "lone", "HTTP 400: bad payload")
	f.Clock.Advance(store.DefaultRetention + time.Hour)
	f.Finish("lone", 0, event.StatusEnded, delivertest.Occurred(t, lone))
	if _, err := f.Store.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	pair := f.Start("pair", 1)
	f.Start("busy", 2)
	for _, o := range []string{"pair", "busy"} {
		deadStart(t, f, "hook", o, "HTTP 400: bad payload")
	}
	f.Finish("pair", 1, event.StatusEnded, delivertest.Occurred(t, pair)) // parked beside its start
	// busy has a start announced again, waiting in the outbox.
	busyEntry := store.Entry{EventID: "busy:start", OriginID: "busy", Transition: event.Start, Body: []byte(`{}`)}
	if _, err := f.Store.Enqueue("hook", busyEntry); err != nil {
		t.Fatal(err)
	}
	d := newDeadLetterSite(t, f)

	page := d.page("")
	pairEnd, loneEnd := seqOf(t, f, "hook", "pair:end"), seqOf(t, f, "hook", "lone:end")
	for _, want := range []string{`id="dl-hook-` + seqOf(t, f, "hook", "pair:start") + `"`, `id="dl-hook-` + pairEnd + `"`,
		`id="dl-hook-` + loneEnd + `"`, "hook (4)", "(parked beside its start)", "HTTP 400: bad payload"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %q:\n%s", want, page)
		}
	}

	msg := d.post("/console/deadletters/hook/"+pairEnd+"/replay", nil)
	if msg != "replayed 2 dead letter(s) (pair:start, pair:end)" {
		t.Errorf("replay of pair's end says %q, want its start and end replayed", msg)
	}
	if got := f.Pending("hook"); !slices.Equal(got, []string{"busy:start", "pair:start", "pair:end"}) {
		t.Errorf("hook's outbox %v, want pair's start before its end, behind busy's waiting start", got)
	}

	msg = d.post("/console/deadletters/hook/"+loneEnd+"/replay", nil)
	if !strings.Contains(msg, `refused lone at hook: the start of alarm lone at sink &#34;hook&#34; is no longer held`) {
		t.Errorf("replay of an end without its start says %q, want the store's refusal", msg)
	}
	if page := d.page(""); !strings.Contains(page, `id="dl-hook-`+loneEnd+`"`) {
		t.Errorf("the refused end is no longer listed:\n%s", page)
	}
	if msg := d.post("/console/deadletters/hook/"+loneEnd+"/drop", nil); msg != "dropped 1 dead letter(s) (lone:end)" {
		t.Errorf("drop says %q", msg)
	}

	busy := seqOf(t, f, "hook", "busy:start")
	if msg := d.post("/console/deadletters/hook/"+busy+"/replay", nil); !strings.Contains(msg, "still wait in the outbox") {
		t.Errorf("replay of busy while its start waits says %q, want refused", msg)
	}
	es, _ := f.Store.Pending("hook", 1)
	if err := f.Store.Delivered(es[0], nil); err != nil {
		t.Fatal(err)
	}
	if msg := d.post("/console/deadletters/hook/"+busy+"/replay", nil); msg != "replayed 1 dead letter(s) (busy:start)" {
		t.Errorf("replay of busy once its start went out says %q", msg)
	}
	if page := d.page(""); strings.Contains(page, `id="dl-hook-`) || !strings.Contains(page, "No dead letter") {
		t.Errorf("dead letters left after replaying and dropping them all:\n%s", page)
	}
	if msg := d.post("/console/deadletters/hook/"+busy+"/drop", nil); !strings.Contains(msg, "no dead letter "+busy+" of sink hook any more") {
		t.Errorf("a second drop says %q", msg)
	}
}

// TestConsoleDeadLettersReplayAllNeedsIMeanIt: the sink-wide buttons do
// nothing until the box is ticked, then take that sink's dead letters only.
func TestConsoleDeadLettersReplayAllNeedsIMeanIt(t *testing.T) {
	f := delivertest.New(t, "hook", "chat")
	for _, o := range []string{"a1", "a2"} {
		f.Start(o, 0)
		deadStart(t, f, "hook", o, "HTTP 410")
		deadStart(t, f, "chat", o, "channel_not_found")
	}
	d := newDeadLetterSite(t, f)
	if msg := d.post("/console/deadletters/hook/replay-all", nil); !strings.Contains(msg, "nothing done: tick &#34;I mean it&#34;") {
		t.Errorf("replay-all without the box says %q", msg)
	}
	if n := len(f.DeadLetters("hook")); n != 2 {
		t.Fatalf("hook holds %d dead letters after an unconfirmed replay-all, want 2", n)
	}
	if msg := d.post("/console/deadletters/hook/replay-all", url.Values{"confirm": {"yes"}}); msg != "replayed 2 dead letter(s) (a1:start, a2:start)" {
		t.Errorf("replay-all says %q", msg)
	}
	if msg := d.post("/console/deadletters/chat/drop-all", url.Values{"confirm": {"yes"}}); msg != "dropped 2 dead letter(s) (a1:start, a2:start)" {
		t.Errorf("drop-all says %q", msg)
	}
	if got := f.Pending("hook"); !slices.Equal(got, []string{"a1:start", "a2:start"}) {
		t.Errorf("hook's outbox %v, want both starts replayed", got)
	}
	page := d.page("?sink=chat")
	if !strings.Contains(page, "No dead letter at sink chat") {
		t.Errorf("chat's page after drop-all:\n%s", page)
	}
}

// TestConsoleDeadLettersRefuseViewersAndForgedForms: a viewer sees the dead
// letters and their Show page without a button, and every replay or drop
// without the admin role, the CSRF token or from another origin is refused
// and changes nothing.
func TestConsoleDeadLettersRefuseViewersAndForgedForms(t *testing.T) {
	f := delivertest.New(t, "hook")
	f.Start("a1", 0)
	deadStart(t, f, "hook", "a1", "HTTP 400")
	d := newDeadLetterSite(t, f)
	seq := seqOf(t, f, "hook", "a1:start")
	resp, page := d.do(d.viewer, "GET", "/console/deadletters", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="dl-hook-`+seq+`"`) || !strings.Contains(page, ">Show</a>") {
		t.Fatalf("a viewer's page: %s\n%s", resp.Status, page)
	}
	_, show := d.do(d.viewer, "GET", "/console/deadletters/hook/"+seq, nil, nil)
	for _, p := range []string{page, show} {
		if strings.Contains(p, ">Replay<") || strings.Contains(p, ">Drop<") || strings.Contains(p, "I mean it") {
			t.Errorf("a viewer's page offers an action:\n%s", p)
		}
	}
	viewerCSRF, adminCSRF := csrf(t, page), csrf(t, d.page(""))
	for _, tc := range []struct {
		name   string
		client *http.Client
		form   url.Values
		header map[string]string
	}{
		{"from a viewer session", d.viewer, url.Values{"csrf": {viewerCSRF}, "confirm": {"yes"}}, map[string]string{"Origin": d.srv.URL}},
		{"without a CSRF token", d.admin, url.Values{"confirm": {"yes"}}, nil},
		{"from another origin", d.admin, url.Values{"csrf": {adminCSRF}, "confirm": {"yes"}}, map[string]string{"Origin": "http://evil.example"}},
	} {
		for _, path := range []string{"hook/" + seq + "/replay", "hook/" + seq + "/drop", "hook/replay-all", "hook/drop-all"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				resp, body := d.do(tc.client, "POST", "/console/deadletters/"+path, tc.form, tc.header)
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s, want 403: %s", resp.Status, body)
				}
				if n := len(f.DeadLetters("hook")); n != 1 {
					t.Errorf("hook holds %d dead letters, want the one untouched", n)
				}
			})
		}
	}
}

// TestConsoleDeadLettersShowEscapedTextAndNoSecret: a sink whose receiver
// echoes the request (its URL's key and its bearer token) in its error
// answer leaves a dead letter whose reason the delivery loop cleaned; the
// page and the Show page carry no secret, and the upstream's hostile names
// in the reason's list and the event's JSON are escaped.
func TestConsoleDeadLettersShowEscapedTextAndNoSecret(t *testing.T) {
	const (
		key     = "query-key-6c1f0e9a2b"
		bearer  = "bearer-token-93d1aa7c"
		hostile = `<script>alert(1)</script>`
	)
	f := delivertest.New(t, "hook")
	echo := notifytest.NewEcho(t, http.StatusBadRequest)
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "hook", URL: echo.URL + "/in?key=" + key,
		Headers: map[string]string{"Authorization": "Bearer " + bearer}, Concurrency: 1})
	f.RunDeliverer(deliver.Options{Secrets: redact.New(key, bearer)}, deliver.Target{Sink: sink})
	a := delivertest.Alarm("a1", 0, event.StatusOngoing, f.Clock.Now().Add(-time.Minute), time.Time{})
	a.StationName, a.DeviceName, a.EventCode = hostile, `"><img src=x onerror=alert(2)>`, "E</td>"
	f.Apply(a)
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.DeadLetters("hook")) == 1 })
	if r := f.DeadLetters("hook")[0].Reason; !strings.Contains(r, redact.Mark) {
		t.Fatalf("the reason %q holds no %s: the receiver did not echo the secrets, and the test proves nothing", r, redact.Mark)
	}
	d := newDeadLetterSite(t, f)
	page := d.page("")
	seq := seqOf(t, f, "hook", "a1:start")
	_, show := d.do(d.admin, "GET", "/console/deadletters/hook/"+seq, nil, nil)
	redacttest.AssertNoSecret(t, []string{key, bearer}, map[string]string{"the dead letters page": page, "the Show page": show})
	for name, p := range map[string]string{"page": page, "show": show} {
		if strings.Contains(p, "<script>") || strings.Contains(p, "<img") || strings.Contains(p, "E</td>") {
			t.Errorf("the %s holds upstream text unescaped:\n%s", name, p)
		}
		if !strings.Contains(p, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("the %s does not show the hostile station escaped:\n%s", name, p)
		}
	}
	if !strings.Contains(show, `&#34;eventCode&#34;: &#34;E\u003c/td\u003e&#34;`) && !strings.Contains(show, `&#34;eventCode&#34;: &#34;E&lt;/td&gt;&#34;`) {
		t.Errorf("the Show page has no indented event JSON with the event code:\n%s", show)
	}
}
