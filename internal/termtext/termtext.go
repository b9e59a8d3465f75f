// Package termtext makes text from the upstream safe to print on a terminal.
//
// Alarm, device and station names come from the upstream as it sends them. A
// name holding an escape sequence could recolour or clear the operator's
// terminal, a carriage return or backspace could overwrite what was printed
// before it, and a bidi override could make a line read differently from
// what it says. Every line relay prints for a person passes such text
// through Escape.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape returns s with every character a terminal does not print as itself
// written as a Go escape, as strconv.Quote writes it: control characters
// ("\x1b", "\r", "\n", "\t"), format characters such as bidi overrides and
// zero-width spaces ("\u202e", "\u200b"), line and paragraph separators, and
// the bytes of invalid UTF-8 ("\xff"). Printable text, in any script, and
// spaces are kept as they are, so "北区储能站" stays readable. Backslashes are
// kept too: Escape makes text harmless to print, not reversible.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[s[i]>>4])
			b.WriteByte("0123456789abcdef"[s[i]&0xf])
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+size])
		default:
			// QuoteRune writes the escape between single quotes.
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// JSON returns the JSON text b with every character Escape would escape
// written as a JSON escape (\u202e, \u007f, a surrogate pair beyond U+FFFF),
// so that printing it is as harmless as printing Escape's text and it still
// decodes to the same values. b must be valid UTF-8, as encoding/json
// writes it; encoding/json already escapes the C0 control characters.
func JSON(b []byte) []byte {
	if !needsEscape(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case unicode.IsGraphic(r) || r == '\n' || r == ' ' || r == '\t':
			// Outside strings, encoding/json writes only ASCII
			// punctuation and these spaces.
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// needsEscape reports whether Escape would change s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !unicode.IsGraphic(r) {
			return true
		}
		i += size
	}
	return false
}
