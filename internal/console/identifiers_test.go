package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/urlpath/urlpathtest"
)

// control is one link or form of a page, as a browser would follow it.
type control struct {
	// Method is GET for a link, the form's method for a form.
	Method string
	// Target is the address the browser asks for, resolved against the
	// page's.
	Target *url.URL
	// Form is the form's fields (inputs, checked boxes, text areas); Label
	// the link's text, untrimmed, or the form's button's.
	Form  url.Values
	Label string
}

// parsePage parses an HTML page, failing the test when it does not parse.
func parsePage(t testing.TB, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the page does not parse: %v", err)
	}
	return doc
}

// each calls fn with n and every node below it, in document order.
func each(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		each(c, fn)
	}
}

// attr returns n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// hasAttr reports whether n has the attribute key.
func hasAttr(n *html.Node, key string) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == key })
}

// text returns the text below n, as a reader sees it.
func text(n *html.Node) string {
	var b strings.Builder
	each(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// controls returns the links and forms below n, resolved against base.
func controls(t testing.TB, n *html.Node, base *url.URL) []control {
	t.Helper()
	var out []control
	each(n, func(c *html.Node) {
		if c.Type != html.ElementNode {
			return
		}
		switch c.Data {
		case "a":
			if href := attr(c, "href"); href != "" {
				out = append(out, control{Method: http.MethodGet, Target: resolve(t, base, href), Label: text(c)})
			}
		case "form":
			f := control{Method: strings.ToUpper(attr(c, "method")), Target: resolve(t, base, attr(c, "action")), Form: url.Values{}}
			if f.Method == "" {
				f.Method = http.MethodGet
			}
			each(c, func(in *html.Node) {
				switch {
				case in.Type != html.ElementNode:
				case in.Data == "input" && attr(in, "type") == "checkbox":
					if hasAttr(in, "checked") {
						f.Form.Add(attr(in, "name"), attr(in, "value"))
					}
				case in.Data == "input" && attr(in, "name") != "":
					f.Form.Add(attr(in, "name"), attr(in, "value"))
				case in.Data == "textarea":
					f.Form.Add(attr(in, "name"), text(in))
				case in.Data == "button":
					f.Label = strings.TrimSpace(text(in))
				}
			})
			out = append(out, f)
		}
	})
	return out
}

// resolve resolves a link's reference as a browser does: against base,
// and with the URL standard's dot segments taken out, which include "%2e"
// and "%2e%2e" in any case (url.ResolveReference takes out only "." and
// "..").
func resolve(t testing.TB, base *url.URL, ref string) *url.URL {
	t.Helper()
	u, err := url.Parse(ref)
	if err != nil {
		t.Fatalf("link %q does not parse: %v", ref, err)
	}
	u = base.ResolveReference(u)
	segs := strings.Split(u.EscapedPath(), "/")
	out := segs[:1]
	for i, seg := range segs[1:] {
		last := i == len(segs)-2
		switch strings.ToLower(seg) {
		case ".", "%2e":
		case "..", ".%2e", "%2e.", "%2e%2e":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	p, err := url.Parse(strings.Join(out, "/"))
	if err != nil {
		t.Fatalf("link %q resolves to a path that does not parse: %v", ref, err)
	}
	u.Path, u.RawPath = p.Path, p.RawPath
	return u
}

// rowsByStation returns the rows of the Now page's table by the station
// id their station cell shows.
func rowsByStation(t testing.TB, page string) map[string]*html.Node {
	t.Helper()
	rows := map[string]*html.Node{}
	each(parsePage(t, page), func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "tr" || !strings.HasPrefix(attr(n, "id"), "alarm-") {
			return
		}
		if cs := cells(n); len(cs) > 3 {
			// The station's id, under its name when it has one.
			station := text(cs[3])
			each(cs[3], func(c *html.Node) {
				if c.Type == html.ElementNode && c.Data == "span" && attr(c, "class") == "sub" {
					station = text(c)
				}
			})
			rows[station] = n
		}
	})
	return rows
}

// cells returns the cells of the table row tr.
func cells(tr *html.Node) []*html.Node {
	var out []*html.Node
	for c := tr.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "td" {
			out = append(out, c)
		}
	}
	return out
}

// submit sends the form or follows the link f as a browser of s would,
// with the Origin of the page, and returns the answer with its body.
func (s *site) submit(c *http.Client, f control) (*http.Response, string) {
	s.t.Helper()
	var body *strings.Reader
	if f.Method == http.MethodPost {
		body = strings.NewReader(f.Form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(f.Method, f.Target.String(), body)
	if err != nil {
		s.t.Fatal(err)
	}
	if f.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.srv.URL)
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, string(b)
}

// acked returns whether each ongoing alarm is acknowledged, by originId.
func acked(t testing.TB, m *manage.Manager) map[string]bool {
	t.Helper()
	as, err := m.Alarms()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range as {
		out[a.OriginID] = a.Acknowledged
	}
	return out
}

// TestNowAcknowledgeOfAnIDWithAPathActsOnThatAlarmAlone: an upstream alarm
// whose originId is A2/ack?x= gets an Acknowledge button that acknowledges
// it, not urgent alarm A2 (on the code before the fix, the form posted to
// /console/alarms/A2/ack?x=/ack and acknowledged A2).
func TestNowAcknowledgeOfAnIDWithAPathActsOnThatAlarmAlone(t *testing.T) {
	const hostile = "A2/ack?x="
	s := newSite(t, console.Options{AdminToken: adminToken}, false,
		record("A2", 0, "S-urgent", "D1", 5), record(hostile, 3, "S-hostile", "D2", 5))
	c := s.browser()
	page := s.login(c, adminToken, "li.wei")
	row := rowsByStation(t, page)["S-hostile"]
	if row == nil {
		t.Fatalf("no row of station S-hostile on the Now page:\n%s", page)
	}
	base, _ := url.Parse(s.srv.URL + "/console/")
	var ack *control
	for _, f := range controls(t, row, base) {
		if f.Label == "Acknowledge" {
			ack = &f
		}
	}
	if ack == nil {
		t.Fatalf("no Acknowledge button in the row of %s", hostile)
	}
	if resp, body := s.submit(c, *ack); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("Acknowledge of %s (%s %s): %s\n%s", hostile, ack.Method, ack.Target, resp.Status, body)
	}
	if got := acked(t, s.mgr); got["A2"] || !got[hostile] {
		t.Fatalf("after the Acknowledge button of %s (posted to %s): acknowledged %v, want %s alone", hostile, ack.Target, got, hostile)
	}
}

// idSite is a console, with and without a tenant's prefix, on a real
// store, manager and silences, where each identifier shape is an ongoing
// alarm's originId, its station's and device's id (and, after a word, their
// names and the event's description), and the name of the sink where its
// start is a dead letter.
type idSite struct {
	*site
	sils   *silence.Silences
	shapes []string
	// back is where the last action sent the browser.
	back *url.URL
}

func newIDSite(t *testing.T, shapes []string) *idSite {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	clk := clock.NewFake(now)
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{LockTimeout: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var alarms []event.Alarm
	var sinks []console.Sink
	for _, s := range shapes {
		a := record(s, 3, s, s, 5)
		a.StationName, a.DeviceName, a.EventDesc = "station "+s, "device "+s, "event "+s
		alarms = append(alarms, a)
		sinks = append(sinks, console.Sink{Name: s, Type: "webhook", DeadLetters: 1})
	}
	urlpathtest.DeadAtOwnSinks(t, st, alarms, now)
	rs, err := route.Parse("rules.yaml", []byte(rules), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	sils, err := silence.Open(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	rulesNow := func() *route.Rules { return rs }
	mgr, err := manage.New(manage.Options{Store: st, Rules: rulesNow, Silences: sils, Shelf: sils, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := console.New(mgr, console.Options{AdminToken: adminToken, ViewToken: viewToken, Store: st, Silences: sils, Rules: rulesNow,
		System: func(context.Context) console.System { return console.System{Tenant: "t1", Sinks: sinks} },
		Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	c.Register(mux)
	// As the ops listener serves a tenant's console: its prefix stripped.
	mux.Handle("/tenants/t1/", http.StripPrefix("/tenants/t1", c))
	s := &idSite{site: &site{t: t, mgr: mgr, st: st}, sils: sils, shapes: shapes}
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	t.Cleanup(c.Close)
	return s
}

// idState is what an action may change: each alarm's acknowledgement,
// each sink's dead letters, each silence's expiry.
type idState struct {
	acked    map[string]bool
	dead     map[string]int
	silences map[string]bool
}

func (s *idSite) state() idState {
	s.t.Helper()
	st := idState{acked: acked(s.t, s.mgr), dead: map[string]int{}, silences: map[string]bool{}}
	counts, err := s.st.DeadLetterCounts()
	if err != nil {
		s.t.Fatal(err)
	}
	for sink, n := range counts {
		if n > 0 {
			st.dead[sink] = n
		}
	}
	for _, sil := range s.sils.List(true) {
		st.silences[sil.ID] = !sil.ExpiredAt.IsZero()
	}
	return st
}

// onlyChanged fails the test unless after is before changed by change,
// new silences left out (the caller checks those).
func (s *idSite) onlyChanged(what string, before, after idState, change func(*idState)) {
	s.t.Helper()
	want := idState{acked: maps.Clone(before.acked), dead: maps.Clone(before.dead), silences: maps.Clone(before.silences)}
	change(&want)
	for id, expired := range after.silences {
		if _, old := before.silences[id]; !old && !expired {
			want.silences[id] = false
		}
	}
	if d := slices.Concat(diffMaps(want.acked, after.acked), diffMaps(want.dead, after.dead), diffMaps(want.silences, after.silences)); len(d) > 0 {
		s.t.Errorf("%s changed what it does not name: %s", what, strings.Join(d, "; "))
	}
}

// diffMaps says where got differs from want.
func diffMaps[V comparable](want, got map[string]V) []string {
	var out []string
	for k, v := range want {
		if w, ok := got[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("%q is %v, want %v", k, w, v))
		}
	}
	for k, w := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%q is %v, want nothing", k, w))
		}
	}
	return out
}

// get fetches path as c and returns the page, failing unless it is 200.
func (s *idSite) get(c *http.Client, u *url.URL) (*html.Node, string) {
	s.t.Helper()
	resp, page := s.submit(c, control{Method: http.MethodGet, Target: u})
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: %s\n%s", u, resp.Status, page)
	}
	doc := parsePage(s.t, page)
	s.noMarkupFromText(u.String(), doc)
	return doc, page
}

// noMarkupFromText fails the test when a page holds an element or an
// attribute that an identifier's text would make if it were not escaped,
// or two elements with one id.
func (s *idSite) noMarkupFromText(where string, doc *html.Node) {
	s.t.Helper()
	ids := map[string]bool{}
	each(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if id := attr(n, "id"); id != "" {
			if ids[id] || strings.ContainsAny(id, " \t\n") {
				s.t.Errorf("%s: the element id %q is not one unique word", where, id)
			}
			ids[id] = true
		}
		if n.Data == "b" || (n.Data == "script" && attr(n, "src") == "") {
			s.t.Errorf("%s: an identifier became markup: <%s>", where, n.Data)
		}
		for _, a := range n.Attr {
			if strings.ContainsAny(a.Key, `"'&<>`) {
				s.t.Errorf("%s: an identifier became an attribute of <%s>: %s", where, n.Data, a.Key)
			}
		}
	})
}

// act sends f as c, expects the 303 of an action and returns the message
// the page it leads to shows.
func (s *idSite) act(c *http.Client, f control) string {
	s.t.Helper()
	resp, body := s.submit(c, f)
	if resp.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("%s %s (%s): %s, want 303\n%s", f.Method, f.Target, f.Label, resp.Status, body)
	}
	s.back = resolve(s.t, f.Target, resp.Header.Get("Location"))
	doc, _ := s.get(c, s.back)
	var flash string
	each(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "p" && attr(n, "class") == "flash" {
			flash = text(n)
		}
	})
	return flash
}

// pick returns the control of cs labelled label, failing when there is
// not exactly one.
func pick(t testing.TB, where string, cs []control, label string) control {
	t.Helper()
	var found []control
	for _, c := range cs {
		if c.Label == label {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d controls labelled %q, want one", where, len(found), label)
	}
	return found[0]
}

// TestConsoleActsOnTheIdentifierEveryLinkAndFormNames walks every link
// and form of the Now, History (list and alarm), Silences, Dead letters
// (list and show) and System pages, with and without a tenant's prefix,
// for every identifier shape of urlpathtest: each action lands on the
// alarm, silence or dead letter it names and changes nothing else, each
// link shows the page of what it names, and every page shows each
// identifier as text.
//
// On the code before urlpath.Segment (run one shape at a time beside A2),
// it failed for 17 of the 23 other shapes. The viewer's History and Show
// links of A2/ack, A2/ack?x=, A2/shelve?, A2#frag, a?b=c&d=e,
// ../deadletters/x/1, ".", "..", %2F, A2%2Fack, <script>alert(1)</script>
// and the 256-byte id led to a 404 (html/template leaves "/", "?", "#" and
// an escape alone in a path); the Acknowledge of x/../A2 acknowledged A2
// (as, walked without the crawl, A2/ack?x= did, and A2/shelve? shelved A2:
// TestNowAcknowledgeOfAnIDWithAPathActsOnThatAlarmAlone); the element ids
// of "with two  spaces", " A2 " and the quoted shape held spaces; and the
// silence form filled in from A2,A3 silenced A2 and A3 (from " A2 ", A2).
// It passed for "...", 100%, %zz, the backslash, and the bidi and
// zero-width characters. Once the links worked it also found the silence
// form of the 256-byte id refused as sent (its comment over 1000 bytes).
func TestConsoleActsOnTheIdentifierEveryLinkAndFormNames(t *testing.T) {
	shapes := urlpathtest.Shapes()
	for _, prefix := range []string{"", "/tenants/t1"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			s := newIDSite(t, shapes)
			admin := s.browser()
			resp, _ := s.do(admin, "POST", prefix+"/console/login", url.Values{"token": {adminToken}, "name": {"li.wei"}}, nil)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: %s", resp.Status)
			}
			base := resolve(t, mustURL(t, s.srv.URL), prefix+"/console/")
			viewer := s.browser()
			if resp, _ := s.do(viewer, "POST", prefix+"/console/login", url.Values{"token": {viewToken}}, nil); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: %s", resp.Status)
			}
			if n := s.crawl(viewer, base); n < 3*len(shapes) {
				t.Errorf("a viewer reached %d pages by the links, want at least a History, a Dead letters and a Show page of each of %d shapes", n, len(shapes))
			}
			s.walkNow(admin, base)
			s.walkHistory(admin, base)
			s.walkSilences(admin, base)
			s.walkSystem(admin, base)
			s.walkDeadLetters(admin, base)
		})
	}
}

// crawl follows every link of the console's pages from base, as c, and
// returns how many pages it reached: each must answer 200 and show every
// identifier as text (get).
func (s *idSite) crawl(c *http.Client, base *url.URL) int {
	s.t.Helper()
	seen := map[string]bool{base.String(): true}
	queue := []*url.URL{base}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		doc, _ := s.get(c, u)
		for _, l := range controls(s.t, doc, u) {
			if l.Method != http.MethodGet || l.Target.Host != base.Host || !strings.HasPrefix(l.Target.Path, base.Path) {
				continue
			}
			l.Target.Fragment = ""
			if k := l.Target.String(); !seen[k] && l.Form == nil {
				seen[k] = true
				queue = append(queue, l.Target)
			}
		}
	}
	return len(seen)
}

// walkNow presses Acknowledge, Unacknowledge and Shelve in each alarm's
// row of the Now page and follows its Silence link.
func (s *idSite) walkNow(c *http.Client, base *url.URL) {
	t := s.t
	t.Helper()
	// nowRow returns the controls of alarm id's row on the Now page
	// filtered by its station, as the filters' form asks for it, and checks
	// the page and its live rows show that alarm alone.
	nowRow := func(id string) []control {
		filtered := resolve(t, base, "?"+url.Values{"station": {id}}.Encode())
		doc, page := s.get(c, filtered)
		rows := rowsByStation(t, page)
		if len(rows) != 1 || rows[id] == nil {
			t.Fatalf("the Now page of station %q (%s) shows the stations %q", id, filtered, slices.Collect(maps.Keys(rows)))
		}
		each(doc, func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "table" && attr(n, "id") == "now-table" {
				live := resolve(t, filtered, attr(n, "data-rows"))
				if _, rowsPage := s.get(c, live); !slices.Equal(slices.Collect(maps.Keys(rowsByStation(t, rowsPage))), []string{id}) {
					t.Errorf("the live rows of station %q (%s) are not its alarm's alone:\n%s", id, live, rowsPage)
				}
			}
		})
		return controls(t, rows[id], filtered)
	}
	for _, id := range s.shapes {
		for _, step := range []struct {
			label, kind string
			acked       bool
		}{{"Acknowledge", "ack", true}, {"Unacknowledge", "unack", false}} {
			before := s.state()
			f := pick(t, "row of "+id, nowRow(id), step.label)
			if msg, want := s.act(c, f), step.kind+" of "+id+": done"; msg != want {
				t.Errorf("%s of %q (%s): the page says %q, want %q", step.label, id, f.Target, msg, want)
			}
			if got := s.back.Query()["station"]; !slices.Equal(got, []string{id}) {
				t.Errorf("%s of %q sent the browser to %s, which filters by the stations %q", step.label, id, s.back, got)
			}
			s.onlyChanged(step.label+" of "+id, before, s.state(), func(st *idState) { st.acked[id] = step.acked })
		}
		before := s.state()
		f := pick(t, "row of "+id, nowRow(id), "Shelve 1h")
		if msg, want := s.act(c, f), "shelve of "+id+": done"; msg != want {
			t.Errorf("Shelve of %q (%s): the page says %q, want %q", id, f.Target, msg, want)
		}
		s.onlyChanged("Shelve of "+id, before, s.state(), func(*idState) {})
		var added []silence.Silence
		for _, sil := range s.sils.List(false) {
			if _, old := before.silences[sil.ID]; !old {
				added = append(added, sil)
			}
		}
		if len(added) != 1 || !slices.Equal(added[0].Match.DeviceSNs, []string{id}) {
			t.Errorf("Shelve of %q added silences %+v, want one of device %q", id, added, id)
		}
		s.checkSilenceForm(c, pick(t, "row of "+id, nowRow(id), "Silence"), id)
	}
}

// checkSilenceForm follows a Silence link, checks the form it opens is
// filled in from alarm id, sends it, and checks the silence it adds is of
// alarm id's point alone.
func (s *idSite) checkSilenceForm(c *http.Client, link control, id string) {
	s.t.Helper()
	doc, _ := s.get(c, link.Target)
	var form *control
	each(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "form" && strings.Contains(attr(n, "class"), "silence-form") {
			f := controls(s.t, n, link.Target)[0]
			form = &f
		}
	})
	if form == nil {
		s.t.Fatalf("Silence link %s opens no silence form", link.Target)
	}
	form.Form.Set("duration", "1h")
	before := s.state()
	if msg := s.act(c, *form); !strings.HasPrefix(msg, "silence ") {
		s.t.Errorf("the silence form of alarm %q says %q", id, msg)
	}
	s.onlyChanged("the silence form of alarm "+id, before, s.state(), func(*idState) {})
	for _, sil := range s.sils.List(false) {
		if _, old := before.silences[sil.ID]; !old {
			if m := sil.Match; !slices.Equal(m.StationIDs, []string{id}) || !slices.Equal(m.DeviceSNs, []string{id}) {
				s.t.Errorf("the silence form of alarm %q added a silence of stations %q, devices %q", id, m.StationIDs, m.DeviceSNs)
			}
			if _, err := s.sils.Expire(sil.ID); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	var alarm []string
	each(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "name") == "alarm" {
			alarm = append(alarm, attr(n, "value"))
		}
	})
	if !slices.Equal(alarm, []string{id}) {
		s.t.Errorf("Silence link %s opens a form for alarm %q, want %q", link.Target, alarm, id)
	}
}

// walkHistory follows each History row's link to its alarm's page, and
// that page's links.
func (s *idSite) walkHistory(c *http.Client, base *url.URL) {
	t := s.t
	t.Helper()
	doc, _ := s.get(c, resolve(t, base, "history"))
	links := map[string]control{}
	each(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tbody" && attr(n, "id") == "history" {
			for _, l := range controls(t, n, resolve(t, base, "history")) {
				links[l.Label] = l
			}
		}
	})
	for _, id := range s.shapes {
		l, ok := links[id]
		if !ok {
			t.Errorf("History has no link reading %q", id)
			continue
		}
		page, _ := s.get(c, l.Target)
		var h2 string
		each(page, func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "h2" {
				h2 = text(n)
			}
		})
		if h2 != "Alarm "+id {
			t.Errorf("History's link %q (%s) opens %q, want alarm %q", id, l.Target, h2, id)
		}
		for _, f := range controls(t, page, l.Target) {
			switch f.Label {
			case "Back to the history":
				s.get(c, f.Target)
			case "Silence this alarm's point":
				s.checkSilenceForm(c, f, id)
			}
		}
	}
}

// walkSilences presses each silence's Expire on the Silences page.
func (s *idSite) walkSilences(c *http.Client, base *url.URL) {
	t := s.t
	t.Helper()
	for _, sil := range s.sils.List(false) {
		doc, _ := s.get(c, resolve(t, base, "silences"))
		var row *html.Node
		each(doc, func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "tr" && attr(n, "id") == "silence-"+sil.ID {
				row = n
			}
		})
		if row == nil {
			t.Fatalf("the Silences page has no row of silence %s", sil.ID)
		}
		if device := sil.Match.DeviceSNs[0]; !strings.Contains(text(row), device) {
			t.Errorf("the row of silence %s reads %q, which does not hold its device %q", sil.ID, text(row), device)
		}
		before := s.state()
		s.act(c, pick(t, "silence "+sil.ID, controls(t, row, resolve(t, base, "silences")), "Expire"))
		s.onlyChanged("Expire of silence "+sil.ID, before, s.state(), func(st *idState) { st.silences[sil.ID] = true })
	}
}

// walkSystem follows each sink's dead-letter link of the System page.
func (s *idSite) walkSystem(c *http.Client, base *url.URL) {
	t := s.t
	t.Helper()
	doc, _ := s.get(c, resolve(t, base, "system"))
	var sinks int
	each(doc, func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "tr" || !strings.HasPrefix(attr(n, "id"), "sink-") {
			return
		}
		sinks++
		name := text(cells(n)[0])
		l := controls(t, n, resolve(t, base, "system"))
		if len(l) != 1 {
			t.Fatalf("the System row of sink %q has %d links, want its dead letters'", name, len(l))
		}
		if got := s.deadLetterSinks(c, l[0].Target); !slices.Equal(got, []string{name}) {
			t.Errorf("System's dead-letter link of sink %q (%s) shows the sinks %q", name, l[0].Target, got)
		}
	})
	if sinks != len(s.shapes) {
		t.Errorf("the System page lists %d sinks, want %d", sinks, len(s.shapes))
	}
}

// deadLetterSinks returns the sinks whose dead letters the page at u
// shows, by the text of their rows (the alarm of each letter is named as
// its sink).
func (s *idSite) deadLetterSinks(c *http.Client, u *url.URL) []string {
	s.t.Helper()
	doc, _ := s.get(c, u)
	var out []string
	for _, sec := range deadLetterSections(doc) {
		out = append(out, sec.sink)
	}
	return out
}

// deadLetterSection is a sink's part of the Dead letters page.
type deadLetterSection struct {
	sink string
	node *html.Node
}

// deadLetterSections returns the page's sinks, each named by the alarm of
// its first letter (which newIDSite names as its sink).
func deadLetterSections(doc *html.Node) []deadLetterSection {
	var out []deadLetterSection
	each(doc, func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "section" || attr(n, "class") != "deadletters" {
			return
		}
		each(n, func(r *html.Node) {
			if r.Type == html.ElementNode && r.Data == "tr" && strings.HasPrefix(attr(r, "id"), "dl-") {
				out = append(out, deadLetterSection{sink: strings.TrimSuffix(text(cells(r)[1]), " start"), node: n})
			}
		})
	})
	return out
}

// walkDeadLetters follows each sink's link of the Dead letters page, each
// letter's Show, and presses one of Replay, Drop (on the list or on the
// letter's page), Replay all or Drop all for each sink.
func (s *idSite) walkDeadLetters(c *http.Client, base *url.URL) {
	t := s.t
	t.Helper()
	list := resolve(t, base, "deadletters")
	doc, _ := s.get(c, list)
	each(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "nav" && attr(n, "aria-label") == "sinks" {
			for _, l := range controls(t, n, list) {
				if l.Label == "All sinks" {
					continue
				}
				name := l.Label[:strings.LastIndex(l.Label, " (")]
				if got := s.deadLetterSinks(c, l.Target); !slices.Equal(got, []string{name}) {
					t.Errorf("the Dead letters link %q (%s) shows the sinks %q", l.Label, l.Target, got)
				}
			}
		}
	})
	for i, id := range s.shapes {
		doc, _ := s.get(c, list)
		var sec *html.Node
		for _, d := range deadLetterSections(doc) {
			if d.sink == id {
				sec = d.node
			}
		}
		if sec == nil {
			t.Fatalf("the Dead letters page has no letter of sink %q", id)
		}
		cs := controls(t, sec, list)
		show := pick(t, "sink "+id, cs, "Show")
		page, _ := s.get(c, show.Target)
		var h2 string
		each(page, func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == "h2" {
				h2 = text(n)
			}
		})
		if !strings.HasPrefix(h2, "Dead letter ") || !strings.HasSuffix(h2, " of sink "+id) {
			t.Errorf("Show of sink %q's letter (%s) opens %q", id, show.Target, h2)
		}
		var f control
		switch i % 6 {
		case 0:
			f = pick(t, "sink "+id, cs, "Replay")
		case 1:
			f = pick(t, "sink "+id, cs, "Drop")
		case 2:
			f = pick(t, "letter of "+id, controls(t, page, show.Target), "Replay")
		case 3:
			f = pick(t, "letter of "+id, controls(t, page, show.Target), "Drop")
		case 4:
			f = pick(t, "sink "+id, cs, "Replay all of this sink")
			f.Form.Set("confirm", "yes")
		case 5:
			f = pick(t, "sink "+id, cs, "Drop all of this sink")
			f.Form.Set("confirm", "yes")
		}
		before := s.state()
		s.act(c, f)
		s.onlyChanged(f.Label+" of sink "+id, before, s.state(), func(st *idState) { delete(st.dead, id) })
	}
}
