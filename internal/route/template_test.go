package route

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/tmpl"
)

func natsRules(subject string) string {
	return "sinks:\n  - name: bus\n    type: nats\n    subject: '" + subject + "'\nroutes:\n  - {name: all, to: [bus]}\n"
}

// TestTemplatesThatExceedTheBoundsAreRefusedAtLoad: each of these took
// seconds to forever of CPU, or gigabytes, in relay check and at every
// reload; now each is refused, naming the bound, within a bounded time.
func TestTemplatesThatExceedTheBoundsAreRefusedAtLoad(t *testing.T) {
	cases := []struct{ name, subject, want string }{
		// Loops stop at the step bound or, on a loaded machine, the time
		// bound, whichever comes first.
		{"two billion iterations", `a.{{range 2000000000}}{{end}}b`, "exceeds its bounds"},
		{"nested ranges", `a.{{range 100000}}{{range 100000}}{{range 100000}}{{end}}{{end}}{{end}}b`, "exceeds its bounds"},
		{"huge printf width", `a.{{printf "%0999999999d" 1}}`, "printf width"},
		{"printf width from an argument", `a.{{printf "%0*d" 999999999 1}}`, "printf width"},
		{"huge precision", `a.{{printf "%.999999999f" 1.0}}`, "printf width"},
		{"huge output", `a.{{range 9000}}{{printf "%0200d" 1}}{{end}}`, "writes more than"},
		{"recursive template", `{{define "x"}}{{template "x" .}}{{template "x" .}}{{end}}a.{{template "x" .}}`, "exceeds its bounds"},
		{"raw record in a subject", `a.{{printf "%s" .Event.Data.Alarm}}`, "white space"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse("rules.yaml", []byte(natsRules(c.subject)), nil)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("refusing took %s", took)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "rules.yaml:4: sinks[0].subject") {
				t.Fatalf("err = %v, want one at rules.yaml:4 naming %q", err, c.want)
			}
		})
	}
}

// TestTemplateBoundsHoldAtRender: a template that passes on the samples but
// loops over a field's length is stopped by the bound on a real event whose
// field is long, instead of running for minutes.
func TestTemplateBoundsHoldAtRender(t *testing.T) {
	r, err := Parse("rules.yaml", []byte(natsRules(`a.{{range len $.DeviceSN}}{{range len $.DeviceSN}}{{range len $.DeviceSN}}{{end}}{{end}}{{end}}b`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	sink, _ := r.Sink("bus")
	ev := event.Samples()[0]
	if got, err := sink.Config.Render(&ev); err != nil || got[0].What != "PUBLISH a.b" {
		t.Fatalf("sample: %v", err)
	}
	ev.Data.DeviceSN = strings.Repeat("S", 16<<10)
	start := time.Now()
	_, err = sink.Config.Render(&ev)
	if !errors.Is(err, tmpl.ErrBounds) {
		t.Fatalf("err = %v, want tmpl.ErrBounds", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("render took %s", took)
	}
}

// TestSampleEventsHaveEveryField: templates are checked against samples with
// every field set, so that one failing on a field that real events carry is
// refused at check. The end has every field of an alarm's life; the start
// adds the acknowledge command and an escalation, the ack sample who
// acknowledged.
func TestSampleEventsHaveEveryField(t *testing.T) {
	samples := event.Samples()
	end := samples[len(samples)-1]
	ack := event.SampleAck()
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct {
			for i := range v.NumField() {
				check(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
			return
		}
		switch path {
		case "Event.Data.Status": // 0 is the upstream's "ended"
		case "Event.TraceParent", "Event.TraceState":
			// Set only with tracing on; the samples are what relay
			// route --render shows, as relay sends without tracing.
		case "Event.Data.AckCommand":
			if samples[0].Data.AckCommand == "" {
				t.Errorf("%s is empty in the sample start event", path)
			}
		case "Event.Data.Ack":
			check(path, reflect.ValueOf(ack.Data.Ack))
		case "Event.Data.Escalation":
			check(path, reflect.ValueOf(samples[0].Data.Escalation))
		default:
			if v.IsZero() {
				t.Errorf("%s is empty in the sample end event", path)
			}
		}
	}
	check("Event", reflect.ValueOf(end))
	if samples[0].Data.Transition != "start" || end.Data.Transition != "end" {
		t.Errorf("samples are %s and %s, want start and end", samples[0].Data.Transition, end.Data.Transition)
	}
}
