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
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/urlpath"
)

// hostileCode marks the simulator's alarms that renamingUpstream renames:
// an event code the simulator does not know, which it sends as given.
const hostileCode = "HOSTILE-ID"

// renamingUpstream returns a front for startRelayBehind: a proxy in front of
// the simulator that sends the alarms whose eventCode is hostileCode with
// the originId name holds instead of theirs, as an upstream that picks its
// ids may. name is read at each answer.
func renamingUpstream(t *testing.T, name *atomic.Pointer[string]) func(*sim.Server) string {
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
			if d.Decode(&v) == nil && rename(v, *name.Load()) {
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

// rename gives every object in v whose eventCode is hostileCode the
// originId name, and reports whether it changed one.
func rename(v any, name string) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		if v["eventCode"] == hostileCode {
			if _, ok := v["originId"]; ok {
				v["originId"] = name
				changed = true
			}
		}
		for _, e := range v {
			changed = rename(e, name) || changed
		}
	case []any:
		for _, e := range v {
			changed = rename(e, name) || changed
		}
	}
	return changed
}

// rowOf returns the XPath of alarm id's row on the Now page, whatever the
// id holds: the row's id attribute is the originId as a path segment.
func rowOf(id string) string { return `//tr[@id="alarm-` + urlpath.Segment(id) + `"]` }

// An upstream alarm whose id is another ongoing alarm's with a path after
// it (<id>/ack?x=) has its own row on the Now page, and its Acknowledge
// button acknowledges it and not the other alarm: after the click the page
// shows it acknowledged and the other still unacknowledged.
func TestAcknowledgeTheRowOfAnIDWithASlashAndAQuery(t *testing.T) {
	t.Parallel()
	var name atomic.Pointer[string]
	name.Store(new(string))
	r := startRelayBehind(t, consoleRules, renamingUpstream(t, &name))
	plain := r.startAlarm(sim.AlarmSpec{Level: 0})
	hostile := plain + "/ack?x="
	name.Store(&hostile)
	r.startAlarm(sim.AlarmSpec{Level: 1, EventCode: hostileCode})
	p := tab(t)

	r.login(p, adminToken, "ana")
	ack := func(id, label string) string { return rowOf(id) + `//button[normalize-space()="` + label + `"]` }
	p.Do("both alarms on Now", chromedp.WaitVisible(ack(plain, "Acknowledge")), chromedp.WaitVisible(ack(hostile, "Acknowledge")))
	p.Screenshot("now with the hostile id")
	p.Do("acknowledging "+hostile, browsertest.Live(chromedp.Click(ack(hostile, "Acknowledge"))))
	p.Do("the page after the acknowledgement", chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="pages"]`)))
	p.Screenshot("now after acknowledging the hostile id")
	if flash := browsertest.Run(p, "the flash", chromedp.Text(chromedp.CSS("p.flash"))); !strings.Contains(flash, hostile) {
		t.Errorf("the page says %q after the acknowledgement, want a word about %s", flash, hostile)
	}
	p.Do("the rows after the acknowledgement", chromedp.WaitVisible(rowOf(hostile)), chromedp.WaitVisible(rowOf(plain)))
	state := func(id string) string {
		return browsertest.Run(p, "the state of "+id, chromedp.Text(rowOf(id)+"/td[1]"))
	}
	if s := state(hostile); !strings.HasPrefix(s, "acknowledged") {
		t.Errorf("the row of %s says %q after its Acknowledge was clicked, want acknowledged", hostile, s)
	}
	if s := state(plain); !strings.HasPrefix(s, "unacknowledged") {
		t.Errorf("the row of %s says %q after the Acknowledge of %s was clicked, want unacknowledged", plain, s, hostile)
	}
}
