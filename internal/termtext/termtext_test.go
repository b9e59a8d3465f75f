package termtext_test

import (
	"encoding/json"
	"strings"
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
	// Every rune of the planes that hold characters (0 to 2 and 14, tags
	// and variation selectors), and the last private-use ones, in chunks:
	// one Escape per chunk keeps the test quick.
	const chunk = 1 << 12
	for _, span := range [][2]rune{{0, 0x2ffff}, {0xe0000, 0xeffff}, {0x10f000, unicode.MaxRune}} {
		for lo := span[0]; lo <= span[1]; lo += chunk {
			var b strings.Builder
			for r := lo; r < lo+chunk && r <= span[1]; r++ {
				b.WriteRune(r)
			}
			for _, c := range termtext.Escape(b.String()) {
				if !unicode.IsGraphic(c) {
					t.Fatalf("Escape of the runes from %U keeps %U", lo, c)
				}
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
