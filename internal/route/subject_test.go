package route

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
)

func TestSanitizeToken(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain-id_42", "plain-id_42"},
		{"", "_"},
		{"a.b", "a_b"},
		{"a*b>c", "a_b_c"},
		{"North Field\t1\n", "North_Field_1_"},
		{"no\x00nul", "no_nul"},
		{"北京 站", "北京_站"},
		{"a\u00a0b", "a_b"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			if got := SanitizeToken(c.in); got != c.want {
				t.Fatalf("SanitizeToken(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestRenderSubjectSanitisesEverySubstitutedValue(t *testing.T) {
	r := mustParse(t, `
sinks:
  - {name: default, type: nats}
  - {name: names, type: nats, subject: "alarms.{{.Event.Data.StationName}}.{{.LevelName}}.{{.DeviceSN}}"}
  - {name: ranged, type: nats, subject: "alarms.{{with .Event}}{{.Data.DeviceName}}{{end}}.x"}
  - {name: log, type: console}
routes:
  - {name: all, to: [default, names, ranged, log]}
`)
	ev := newEvent(event.End, func(a *event.Alarm) {
		a.TenantID = "tenant.one"
		a.StationID = "st *>"
		a.StationName = "North Field.1"
		a.DeviceSN = ""
		a.DeviceName = "rack >7"
	})
	cases := []struct{ sink, want string }{
		{"default", "energy.alarms.tenant_one.st___.2.end"},
		{"names", "alarms.North_Field_1.major._"},
		{"ranged", "alarms.rack__7.x"},
	}
	for _, c := range cases {
		t.Run(c.sink, func(t *testing.T) {
			s, _ := r.Sink(c.sink)
			got, err := s.RenderSubject(ev)
			if err != nil || got != c.want {
				t.Fatalf("RenderSubject = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if ev.Data.StationName != "North Field.1" {
		t.Fatal("rendering changed the event")
	}
	log, _ := r.Sink("log")
	if _, err := log.RenderSubject(ev); err == nil || !strings.Contains(err.Error(), `sink "log"`) {
		t.Fatalf("a console sink rendered a subject: %v", err)
	}
}

func TestSubjectsReadingOnlyFlatFieldsSkipTheEventCopy(t *testing.T) {
	cases := []struct {
		text  string
		plain bool
	}{
		{DefaultSubject, true},
		{"a.{{.TenantID | printf \"%s\"}}", true},
		{"a.{{$t := .TenantID}}{{$t}}", true},
		{"a.{{.Event.Data.StationName}}", false},
		{"a.{{$.Event.ID}}", false},
		{"a.{{with .TenantID}}{{.}}{{end}}", false},
		{"a.{{if .Event}}x{{end}}", false},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			_, plain, err := compileSubject(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if plain != c.plain {
				t.Fatalf("plain = %v, want %v", plain, c.plain)
			}
		})
	}
}
