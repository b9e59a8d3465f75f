package console

import (
	"slices"
	"testing"

	"github.com/relay-energy/relay/internal/urlpath/urlpathtest"
)

// TestSilenceFormListsReadBackTheValuesWritten: a field of the silence
// form filled in from an alarm reads back as the alarm's very ids, whatever
// they hold (a comma, quotes, spaces around), and a list typed by hand
// reads as before: values separated by commas, trimmed, empty ones left out.
func TestSilenceFormListsReadBackTheValuesWritten(t *testing.T) {
	shapes := urlpathtest.Shapes()
	for _, values := range [][]string{shapes, {`"`, `""`, `a"b`, ` "x" `}, {"D1"}} {
		field := formatList(values)
		if got := parseList(field); !slices.Equal(got, values) {
			t.Errorf("formatList(%q) = %q, which reads as %q", values, field, got)
		}
	}
	for typed, want := range map[string][]string{
		"D1, D2":           {"D1", "D2"},
		" D1 ,, D2 , ":     {"D1", "D2"},
		`"A2,A3", D4`:      {"A2,A3", "D4"},
		`"say ""hi""" , x`: {`say "hi"`, "x"},
		`"unclosed, D1`:    {"unclosed, D1"},
		`ab"c, d`:          {`ab"c`, "d"},
		"":                 nil,
	} {
		if got := parseList(typed); !slices.Equal(got, want) {
			t.Errorf("parseList(%q) = %q, want %q", typed, got, want)
		}
	}
}
