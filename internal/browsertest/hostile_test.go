package browsertest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/urlpath"
)

// renamingUpstream returns a front for startRelayBehind: a proxy in front of
// the simulator that sends each alarm whose eventCode is a key of names
// with the originId names holds for it instead of its own, as an upstream
// that picks its ids may. Event codes the simulator does not know are sent
// as given; names is read at each answer.
func renamingUpstream(t *testing.T, names *sync.Map) func(*sim.Server) string {
	return func(up *sim.Server) string {
		target, err := url.Parse(up.URL())
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		// The relay cancels the poll under way when it stops: not news.
		proxy.ErrorLog = log.New(io.Discard, "", 0)
		direct := proxy.Director
		proxy.Director = func(r *http.Request) {
			direct(r)
			r.Header.Del("Accept-Encoding") // answers to rewrite, not gzip
		}
		proxy.ModifyResponse = func(resp *http.Response) error {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			var v any
			if d.Decode(&v) == nil && rename(v, names) {
				if b, err = json.Marshal(v); err != nil {
					return err
				}
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			resp.ContentLength = int64(len(b))
			resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
			return nil
		}
		srv := httptest.NewServer(proxy)
		t.Cleanup(srv.Close)
		return srv.URL
	}
}

// rename gives every object in v whose eventCode names holds the originId
// names holds for it, and reports whether it changed one.
func rename(v any, names *sync.Map) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if code, ok := v["eventCode"].(string); ok {
			if name, ok := names.Load(code); ok {
				if _, ok := v["originId"]; ok {
					v["originId"] = name
					changed = true
				}
			}
		}
		for _, e := range v {
			changed = rename(e, names) || changed
		}
	case []any:
		for _, e := range v {
			changed = rename(e, names) || changed
		}
	}
	return changed
}

// rowOf returns the XPath of alarm id's row on the Now page, whatever the
// id holds: the row's id attribute is the originId as a path segment.
func rowOf(id string) string { return `//tr[@id="alarm-` + urlpath.Link(id) + `"]` }

// Upstream alarms whose ids are another ongoing alarm's with a path after
// it (<id>/ack?x=), or exactly "." or ".." (which a browser resolves away
// in a path however they are escaped), have their own rows on the Now
// page, and each one's Acknowledge button acknowledges it and no other
// alarm; each one's History link opens its own events.
func TestAcknowledgeTheRowOfAnIDWithASlashAndAQuery(t *testing.T) {
	t.Parallel()
	var names sync.Map
	r := startRelayBehind(t, consoleRules, renamingUpstream(t, &names))
	plain := r.startAlarm(sim.AlarmSpec{Level: 0})
	hostile := []string{plain + "/ack?x=", ".", ".."}
	for i, id := range hostile {
		code := "HOSTILE-ID-" + strconv.Itoa(i)
		names.Store(code, id)
		r.startAlarm(sim.AlarmSpec{Level: 1, EventCode: code})
	}
	p := tab(t)

	r.login(p, adminToken, "ana")
	ack := func(id, label string) string { return rowOf(id) + `//button[normalize-space()="` + label + `"]` }
	// A row's state is read in one evaluation: a live update may replace
	// the rows between finding a node and reading its text.
	state := func(id string) string {
		xpath, _ := json.Marshal(rowOf(id) + "/td[1]")
		return browsertest.Eval[string](p, `document.evaluate(`+string(xpath)+`, document, null, XPathResult.STRING_TYPE, null).stringValue.trim()`)
	}
	p.Do("every alarm on Now", chromedp.WaitVisible(ack(plain, "Acknowledge")))
	for _, id := range hostile {
		p.Do("the row of "+id, chromedp.WaitVisible(ack(id, "Acknowledge")))
	}
	p.Screenshot("now with the hostile ids")
	for i, id := range hostile {
		p.Do("acknowledging "+id, browsertest.ClickNow(ack(id, "Acknowledge")))
		p.Do("the page after the acknowledgement", chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="pages"]`)))
		if flash := browsertest.TextNow(p, "the flash", "p.flash"); !strings.Contains(flash, id) {
			t.Errorf("the page says %q after the acknowledgement of %q, want a word about it", flash, id)
		}
		p.Do("the rows after the acknowledgement", chromedp.WaitVisible(rowOf(id)), chromedp.WaitVisible(rowOf(plain)))
		for j, other := range hostile {
			if want := j <= i; strings.HasPrefix(state(other), "acknowledged") != want {
				t.Errorf("after the Acknowledge of %q was clicked, the row of %q says %q, want acknowledged %v", id, other, state(other), want)
			}
		}
		if s := state(plain); !strings.HasPrefix(s, "unacknowledged") {
			t.Errorf("the row of %s says %q after the Acknowledge of %q was clicked, want unacknowledged", plain, s, id)
		}
	}
	p.Screenshot("now after acknowledging the hostile ids")

	for _, id := range hostile {
		link := `//a[text()=` + xpathString(id) + `]`
		p.Do("History's link of "+id, chromedp.Navigate(r.console("history")), chromedp.WaitVisible(link), browsertest.ClickNow(link))
		// The heading is waited for, not read at once: the click starts a
		// navigation, and a node found in the page before it is gone by
		// the time its text is asked for. A link that opened another
		// page fails here, showing the page it opened.
		p.Do("History's link of "+id+" opening a page headed "+strconv.Quote("Alarm "+id),
			chromedp.WaitVisible(`(//main//h2)[1][normalize-space()=`+xpathString("Alarm "+id)+`]`))
	}
}

// xpathString returns s as an XPath 1.0 string literal, whatever quotes it
// holds.
func xpathString(s string) string {
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	return `concat("` + strings.ReplaceAll(s, `"`, `", '"', "`) + `")`
}
