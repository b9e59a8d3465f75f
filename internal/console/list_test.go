package console

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestSilenceFormCommentFitsASilence: the comment filled in from an alarm
// is cut to what a silence holds, between characters.
func TestSilenceFormCommentFitsASilence(t *testing.T) {
	long := strings.Repeat("北", 400) // 1,200 bytes
	for _, s := range []string{"", "short", long, long[1:]} {
		got := cut(s, 1000)
		if len(got) > 1000 || !utf8.ValidString(got) && utf8.ValidString(s) || (len(s) <= 1000 && got != s) {
			t.Errorf("cut(%d bytes, 1000) = %d bytes %q", len(s), len(got), got)
		}
	}
}
