package termtext_test

import (
	"encoding/json"
	"testing"
	"unicode"

	"github.com/relay-energy/relay/internal/termtext"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text is unchanged", "Grid overvoltage", "Grid overvoltage"},
		{"Chinese stays readable", "北区储能站 电池簇过温", "北区储能站 电池簇过温"},
		{"accents, symbols and wide spaces stay", "Nordhafen Ü – 5 °C\u3000ok", "Nordhafen Ü – 5 °C\u3000ok"},
		{"an escape sequence cannot recolour the terminal", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"a carriage return cannot overwrite the line", "ok\rFAKE", `ok\rFAKE`},
		{"backspace, bell, tab, newline", "a\bb\ac\td\ne", `a\bb\ac\td\ne`},
		{"a bidi override cannot reverse the line", "INV\u202e1000", `INV\u202e1000`},
		{"bidi isolates and zero-width characters", "a\u2066b\u2069c\u200bd", `a\u2066b\u2069c\u200bd`},
		{"line separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"C1 controls such as CSI", "a\u009b31mb", `a\u009b31mb`},
		{"invalid UTF-8 bytes", "a\xffb\xc3", `a\xffb\xc3`},
		{"a tag character", "a\U000E0041b", `a\U000e0041b`},
		{"backslashes are kept", `C:\logs`, `C:\logs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := termtext.Escape(tc.in); got != tc.want {
				t.Fatalf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestEscapeLeavesOnlyGraphicCharacters(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		got := termtext.Escape("a" + string(r) + "b")
		for _, c := range got {
			if !unicode.IsGraphic(c) {
				t.Fatalf("Escape(%q) = %q keeps %U", string(r), got, c)
			}
		}
	}
}

func TestJSONEscapesWhatATerminalInterpretsAndDecodesTheSame(t *testing.T) {
	in := map[string]string{"name": "北区储能站\u202e\u007f\u009b\U000E0041 ok", "code": "\x1b[31m\r"}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := termtext.JSON(b)
	want := "{\n  \"code\": \"\\u001b[31m\\r\",\n  \"name\": \"北区储能站\\u202e\\u007f\\u009b\\udb40\\udc41 ok\"\n}"
	if string(got) != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["name"] != in["name"] || back["code"] != in["code"] {
		t.Fatalf("decodes to %q, %v; want %q", back, err, in)
	}
}
