package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/urlpath/urlpathtest"
)

// opsRoutes is an ops listener that answers the paths of the ops API
// with the patterns internal/service registers, on a ServeMux as the
// relay's, and records what each request named: the pattern matched and
// the identifiers it decoded. That the service acts on what its patterns
// decode is TestOpsAPIActsOnTheIdentifierItsPathNames's part.
type opsRoutes struct {
	mu  sync.Mutex
	got []string
}

func (o *opsRoutes) record(w http.ResponseWriter, r *http.Request, named string, ans any) {
	o.mu.Lock()
	o.got = append(o.got, r.Pattern+" "+named)
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

func (o *opsRoutes) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	return got
}

func (o *opsRoutes) handler() http.Handler {
	mux := http.NewServeMux()
	for _, action := range []string{"ack", "unack", "shelve"} {
		mux.HandleFunc("POST /alarms/{id}/"+action, func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			o.record(w, r, id, service.AckAnswer{Action: action, Result: &notify.ActionResult{Applied: []string{id}, Text: "Done."}})
		})
	}
	mux.HandleFunc("DELETE /silences/{id}", func(w http.ResponseWriter, r *http.Request) {
		o.record(w, r, r.PathValue("id"), service.SilencesAnswer{Action: "expire", Count: 1,
			Silences: []service.SilenceJSON{{Silence: silence.Silence{ID: r.PathValue("id")}}}})
	})
	mux.HandleFunc("GET /deadletters/{sink}/{seq}", func(w http.ResponseWriter, r *http.Request) {
		o.record(w, r, r.PathValue("sink")+" "+r.PathValue("seq"), service.DeadLettersAnswer{Action: "show", Count: 1,
			DeadLetters: []service.DeadLetterJSON{{Sink: r.PathValue("sink")}}})
	})
	for _, action := range []string{"replay", "drop"} {
		mux.HandleFunc("POST /deadletters/"+action, func(w http.ResponseWriter, r *http.Request) {
			o.record(w, r, r.URL.Query().Get("sink")+" "+r.URL.Query().Get("event"), service.DeadLettersAnswer{Action: action, Count: 1})
		})
	}
	mux.HandleFunc("GET /deadletters", func(w http.ResponseWriter, r *http.Request) {
		ans := service.DeadLettersAnswer{Action: "list"}
		for i, s := range urlpathtest.Shapes() {
			ans.DeadLetters = append(ans.DeadLetters, service.DeadLetterJSON{Sink: s, Seq: uint64(i + 1), EventID: s + ":start",
				OriginID: s, Alarm: "ongoing", Reason: "refused: " + s + "\x1b[2J"})
		}
		ans.Count = len(ans.DeadLetters)
		o.record(w, r, "", ans)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		o.record(w, r, r.URL.String(), nil)
		http.Error(w, "no such path", http.StatusNotFound)
	})
	return mux
}

// TestCommandsNameTheIdentifierTheyAreGiven: relay ack, unack and shelve,
// relay silence expire and relay deadletters show, replay and drop reach
// the ops API's path for the alarm, silence or sink they are given, whole,
// whatever its shape. With url.PathEscape, as before urlpath, the ids "."
// and ".." were cleaned out of the path by the relay's ServeMux (a 301 to
// another path), so the command never reached the alarm.
func TestCommandsNameTheIdentifierTheyAreGiven(t *testing.T) {
	o := &opsRoutes{}
	srv := httptest.NewServer(o.handler())
	t.Cleanup(srv.Close)
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": strings.TrimPrefix(srv.URL, "http://"), "USER": "ana"})
	for _, id := range urlpathtest.Shapes() {
		for _, c := range []struct {
			name string
			cmd  command
			args []string
			want string
		}{
			{"ack", cmdAck, []string{id}, "POST /alarms/{id}/ack " + id},
			{"unack", cmdUnack, []string{id}, "POST /alarms/{id}/unack " + id},
			{"shelve", cmdShelve, []string{"--for", "1h", id}, "POST /alarms/{id}/shelve " + id},
			{"silence expire", cmdSilence, []string{"expire", id}, "DELETE /silences/{id} " + id},
			{"deadletters show", cmdDeadLetters, []string{"show", "--sink", id, "--seq", "7"}, "GET /deadletters/{sink}/{seq} " + id + " 7"},
			{"deadletters replay", cmdDeadLetters, []string{"replay", "--sink", id, "--event", id + ":start"}, "POST /deadletters/replay " + id + " " + id + ":start"},
			{"deadletters drop", cmdDeadLetters, []string{"drop", "--sink", id, "--event", id + ":start"}, "POST /deadletters/drop " + id + " " + id + ":start"},
		} {
			code, out, errs := runCmd(t, c.cmd, c.args...)
			if got := o.take(); code != 0 || len(got) != 1 || got[0] != c.want {
				t.Errorf("relay %s %q: exit %d, the ops listener was asked %q, want %q\nstdout %q\nstderr %q", c.name, c.args, code, got, c.want, out, errs)
			}
		}
	}
}

// TestDeadLettersListPrintsIdentifiersAsText: relay deadletters list
// prints each sink's name, event id and reason with what a terminal would
// not print as itself escaped (a bidi override, a zero-width space, an
// escape sequence), as relay ack --list does. Before, it printed them raw.
func TestDeadLettersListPrintsIdentifiersAsText(t *testing.T) {
	o := &opsRoutes{}
	srv := httptest.NewServer(o.handler())
	t.Cleanup(srv.Close)
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": strings.TrimPrefix(srv.URL, "http://")})
	code, out, errs := runCmd(t, cmdDeadLetters, "list")
	if code != 0 || !strings.Contains(out, `\u202eA2kca`) || !strings.Contains(out, `A\u200b2`) || !strings.Contains(out, `\x1b[2J`) {
		t.Fatalf("deadletters list: exit %d, want the bidi override, the zero-width space and the escape written as escapes\nstdout %q\nstderr %q", code, out, errs)
	}
	if strings.ContainsAny(out, "\u202e\u200b\x1b") {
		t.Errorf("deadletters list printed a character a terminal does not print as itself:\n%q", out)
	}
}

// TestCommandsOnTheRunningRelayActOnTheAlarmTheyName: against the running
// relay, relay ack, unack and shelve of an alarm id of every shape, and of
// the id of an ongoing alarm with a path after it (<id>/ack?x=), answer
// that relay does not know that alarm, and the ongoing alarm stays
// unacknowledged and unshelved; relay silence expire and relay deadletters
// show of every shape say there is no such silence or letter.
func TestCommandsOnTheRunningRelayActOnTheAlarmTheyName(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	id := runningRelayWithAlarm(t)
	var names []string
	for _, s := range urlpathtest.Shapes() {
		names = append(names, s, id+"/"+s, id+"/ack?x=", "../"+id, id+"/../"+id)
	}
	for _, name := range names {
		for _, c := range []struct {
			cmd  command
			args []string
		}{{cmdAck, []string{name}}, {cmdUnack, []string{name}}, {cmdShelve, []string{name}}} {
			code, out, errs := runCmd(t, c.cmd, c.args...)
			if code != 1 || !strings.Contains(out, "relay does not know this alarm") {
				t.Errorf("%q on the running relay: exit %d\nstdout %q\nstderr %q; want 1 and that relay does not know it", c.args, code, out, errs)
			}
		}
		if code, out, errs := runCmd(t, cmdSilence, "expire", name); code != 1 || !strings.Contains(errs, "no such silence") {
			t.Errorf("silence expire %q: exit %d\nstdout %q\nstderr %q; want 1 and no such silence", name, code, out, errs)
		}
		if code, out, errs := runCmd(t, cmdDeadLetters, "show", "--sink", name, "--seq", "1"); code != 1 || !strings.Contains(errs, "no dead letter 1 of sink") {
			t.Errorf("deadletters show --sink %q: exit %d\nstdout %q\nstderr %q; want 1 and no such letter", name, code, out, errs)
		}
	}
	code, out, errs := runCmd(t, cmdAck, "--list", "--json")
	var list service.AckAnswer
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Alarms) != 1 || list.Alarms[0].OriginID != id || list.Alarms[0].Acknowledged {
		t.Fatalf("ack --list --json: exit %d, want alarm %s alone and unacknowledged\n%s%s", code, id, out, errs)
	}
	if code, out, _ := runCmd(t, cmdSilence, "list"); code != 0 || !strings.Contains(out, "0 silences listed") {
		t.Errorf("silence list: exit %d, want no silence (nothing was shelved)\n%s", code, out)
	}
}
