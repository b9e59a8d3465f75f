package nats

import (
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
	a := event.Samples()[0]
	a.Data.TenantID = "tenant.one"
	a.Data.StationID = "st *>"
	a.Data.StationName = "North Field.1"
	a.Data.DeviceSN = ""
	a.Data.DeviceName = "rack >7"
	a.Data.Level, a.Data.LevelName, a.Data.Transition = 2, "major", event.End
	ev := &a
	cases := []struct{ subject, want string }{
		{DefaultSubject, "energy.alarms.tenant_one.st___.2.end"},
		{"alarms.{{.Event.Data.StationName}}.{{.LevelName}}.{{.DeviceSN}}", "alarms.North_Field_1.major._"},
		{"alarms.{{with .Event}}{{.Data.DeviceName}}{{end}}.x", "alarms.rack__7.x"},
	}
	for _, c := range cases {
		t.Run(c.subject, func(t *testing.T) {
			s, err := CompileSubject(c.subject)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Render(ev)
			if err != nil || got != c.want {
				t.Fatalf("Render = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if ev.Data.StationName != "North Field.1" {
		t.Fatal("rendering changed the event")
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
			s, err := CompileSubject(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if s.plain != c.plain {
				t.Fatalf("plain = %v, want %v", s.plain, c.plain)
			}
		})
	}
}
