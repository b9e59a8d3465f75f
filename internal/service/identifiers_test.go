package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/urlpath"
	"github.com/relay-energy/relay/internal/urlpath/urlpathtest"
)

const idsToken = "admin-ids-0123456789abcdef"

// idsFixture is the ops API of one tenant on a real store, manager and
// silences, routed as the ops listener routes it: with and without the
// /tenants/<id> prefix. Each identifier shape is an alarm's originId, its
// station's and device's id, and the name of the sink its start was
// dead-lettered at.
type idsFixture struct {
	t    *testing.T
	srv  *httptest.Server
	st   *store.Store
	mgr  *manage.Manager
	sils *silence.Silences
}

func newIDsFixture(t *testing.T, shapes []string) *idsFixture {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	clk := clock.NewFake(now)
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{LockTimeout: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var alarms []event.Alarm
	for _, s := range shapes {
		alarms = append(alarms, event.Alarm{OriginID: s, Status: event.StatusOngoing, Level: 3, EventCode: "E1",
			StationID: s, DeviceSN: s, OccurredAt: now.Add(-5 * time.Minute), Raw: []byte(`{}`)})
	}
	urlpathtest.DeadAtOwnSinks(t, st, alarms, now)
	rs, err := route.Parse("rules.yaml", []byte("sinks:\n  - {name: bus, type: nats, subject: alarms}\nroutes:\n  - {name: all, to: [bus]}\n"),
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	sils, err := silence.Open(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rs }, Silences: sils, Shelf: sils,
		Clock: clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	api := http.NewServeMux()
	(&deadLetterAPI{store: st, token: idsToken, clock: clk, log: log}).register(api)
	(&silenceAPI{silences: sils, token: idsToken, clock: clk, log: log}).register(api)
	(&ackAPI{manager: mgr, token: idsToken, log: log}).register(api)
	ops := http.NewServeMux()
	ops.Handle("/tenants/t1/", http.StripPrefix("/tenants/t1", api))
	for _, p := range tenantAPIPaths {
		ops.Handle(p, api)
	}
	f := &idsFixture{t: t, srv: httptest.NewServer(ops), st: st, mgr: mgr, sils: sils}
	t.Cleanup(f.srv.Close)
	return f
}

// call sends a request with the admin token, not following redirects, and
// decodes a 200 answer into ans.
func (f *idsFixture) call(method, path string, body any, ans any) int {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+idsToken)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && ans != nil {
		if err := json.Unmarshal(b, ans); err != nil {
			f.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// state is what an action may change: each alarm's acknowledgement, each
// sink's dead letters, each silence's end.
type idsState struct {
	acked    map[string]bool
	dead     map[string]int
	silences map[string]time.Time
}

func (f *idsFixture) state() idsState {
	f.t.Helper()
	as, err := f.mgr.Alarms()
	if err != nil {
		f.t.Fatal(err)
	}
	s := idsState{acked: map[string]bool{}, silences: map[string]time.Time{}}
	for _, a := range as {
		s.acked[a.OriginID] = a.Acknowledged
	}
	counts, err := f.st.DeadLetterCounts()
	if err != nil {
		f.t.Fatal(err)
	}
	s.dead = map[string]int{}
	for sink, n := range counts {
		if n > 0 {
			s.dead[sink] = n
		}
	}
	for _, sil := range f.sils.List(true) {
		s.silences[sil.ID] = sil.ExpiredAt
	}
	return s
}

// onlyChanged fails the test unless after differs from before in what
// changed says, and in nothing else.
func (f *idsFixture) onlyChanged(what string, before, after idsState, changed func(*idsState)) {
	f.t.Helper()
	want := idsState{acked: clone(before.acked), dead: clone(before.dead), silences: clone(before.silences)}
	changed(&want)
	for k, v := range after.silences {
		if _, ok := want.silences[k]; !ok && v.IsZero() {
			want.silences[k] = v // a silence the action added, checked by the caller
		}
	}
	for _, d := range [][]string{diff(want.acked, after.acked), diff(want.dead, after.dead), diff(want.silences, after.silences)} {
		if len(d) > 0 {
			f.t.Errorf("%s: %s", what, strings.Join(d, "; "))
		}
	}
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// diff says where got differs from want.
func diff[K, V comparable](want, got map[K]V) []string {
	var out []string
	for k, v := range want {
		if w, ok := got[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("%q is %v, want %v", fmt.Sprint(k), w, v))
		}
	}
	for k, w := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%q is %v, want nothing", fmt.Sprint(k), w))
		}
	}
	return out
}

// TestOpsAPIActsOnTheIdentifierItsPathNames: every ops API path that names
// an alarm, a silence or a dead letter, built with urlpath.Segment as the
// CLI builds it, with and without the tenant's prefix, reaches the thing
// named and changes nothing else, whatever the shape of its identifier.
// On the code before urlpath, the CLI escaped with url.PathEscape, and the
// shapes "." and ".." were cleaned out of the path by the ServeMux (a 301
// to another path) for every one of these paths.
func TestOpsAPIActsOnTheIdentifierItsPathNames(t *testing.T) {
	shapes := urlpathtest.Shapes()
	for _, prefix := range []string{"", "/tenants/t1"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			f := newIDsFixture(t, shapes)
			for i, id := range shapes {
				seg := urlpath.Segment(id)
				var show AckAnswer
				if code := f.call("GET", prefix+"/alarms/"+seg, nil, &show); code != http.StatusOK || show.Alarm == nil || show.Alarm.OriginID != id {
					t.Errorf("GET /alarms/%s: %d, alarm %+v; want 200 and alarm %q", seg, code, show.Alarm, id)
				}
				for _, action := range []string{"ack", "unack"} {
					before := f.state()
					var ans AckAnswer
					code := f.call("POST", prefix+"/alarms/"+seg+"/"+action, AckRequest{By: "ana"}, &ans)
					if code != http.StatusOK || ans.Result == nil || !slices.Equal(ans.Result.Applied, []string{id}) {
						t.Errorf("POST /alarms/%s/%s: %d, %+v; want 200 applied to %q alone", seg, action, code, ans.Result, id)
					}
					f.onlyChanged("POST /alarms/"+seg+"/"+action, before, f.state(), func(s *idsState) { s.acked[id] = action == "ack" })
				}
				before := f.state()
				var shelved AckAnswer
				code := f.call("POST", prefix+"/alarms/"+seg+"/shelve", AckRequest{By: "ana", Duration: "1h"}, &shelved)
				if code != http.StatusOK || shelved.Result == nil || !slices.Equal(shelved.Result.Applied, []string{id}) {
					t.Errorf("POST /alarms/%s/shelve: %d, %+v; want 200 applied to %q alone", seg, code, shelved.Result, id)
				}
				after := f.state()
				f.onlyChanged("POST /alarms/"+seg+"/shelve", before, after, func(*idsState) {})
				var added []silence.Silence
				for _, s := range f.sils.List(false) {
					if _, old := before.silences[s.ID]; !old {
						added = append(added, s)
					}
				}
				if len(added) != 1 || !slices.Equal(added[0].Match.DeviceSNs, []string{id}) {
					t.Fatalf("shelve of %q added silences %+v, want one of device %q", id, added, id)
				}

				sid := urlpath.Segment(added[0].ID)
				var sil SilencesAnswer
				if code := f.call("GET", prefix+"/silences/"+sid, nil, &sil); code != http.StatusOK || len(sil.Silences) != 1 || sil.Silences[0].ID != added[0].ID {
					t.Errorf("GET /silences/%s: %d, %+v", sid, code, sil)
				}
				if code := f.call("GET", prefix+"/silences/"+seg, nil, nil); code != http.StatusNotFound {
					t.Errorf("GET /silences/%s (no such silence): %d, want 404", seg, code)
				}
				before = f.state()
				if code := f.call("DELETE", prefix+"/silences/"+sid, nil, &sil); code != http.StatusOK {
					t.Errorf("DELETE /silences/%s: %d", sid, code)
				}
				f.onlyChanged("DELETE /silences/"+sid, before, f.state(), func(s *idsState) { s.silences[added[0].ID] = f.silenceEnd(added[0].ID) })

				ds, err := f.st.FindDeadLetters(store.DeadLetterFilter{Sink: id})
				if err != nil || len(ds) != 1 {
					t.Fatalf("dead letters of sink %q: %v, %v", id, ds, err)
				}
				letter := prefix + "/deadletters/" + seg + "/" + strconv.FormatUint(ds[0].Seq, 10)
				var dl DeadLettersAnswer
				if code := f.call("GET", letter, nil, &dl); code != http.StatusOK || len(dl.DeadLetters) != 1 || dl.DeadLetters[0].Sink != id || dl.DeadLetters[0].OriginID != id {
					t.Errorf("GET %s: %d, %+v; want the letter of sink %q", letter, code, dl.DeadLetters, id)
				}
				action := []string{"replay", "drop"}[i%2]
				q := url.Values{"sink": {id}, "event": {ds[0].EventID}}
				before = f.state()
				if code := f.call("POST", prefix+"/deadletters/"+action+"?"+q.Encode(), nil, &dl); code != http.StatusOK || dl.Count != 1 {
					t.Errorf("POST /deadletters/%s?%s: %d, %+v; want 200 and one letter", action, q.Encode(), code, dl)
				}
				f.onlyChanged("POST /deadletters/"+action+" of sink "+id, before, f.state(), func(s *idsState) { delete(s.dead, id) })
			}
		})
	}
}

// silenceEnd returns when the silence id was expired.
func (f *idsFixture) silenceEnd(id string) time.Time {
	s, _ := f.sils.Get(id)
	return s.ExpiredAt
}
