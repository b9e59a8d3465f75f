package telegram

import (
	"strings"
	"unicode/utf8"
)

// Escape makes s plain text in Telegram's HTML style: &, < and > become
// &amp;, &lt; and &gt;, as the Bot API asks of every such character that is
// not part of a tag or an entity. Values are never put inside attributes,
// so quotes stay as they are.
func Escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Truncate cuts s, a message in Telegram's HTML style, to at most n
// characters after entities parsing (tags take none, an entity one, a
// character outside the Basic Multilingual Plane two, as Telegram counts
// UTF-16 code units), ending it with "…" and closing the tags left open
// when it was cut. s is cut between tags, entities and characters, never
// inside one.
func Truncate(s string, n int) string {
	if visible(s) <= n {
		return s
	}
	const more = "…"
	width, cut := 0, 0
	for i := 0; i < len(s); {
		if s[i] == '<' {
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				break
			}
			i += end + 1
			continue
		}
		w, size := 1, 0
		if s[i] == '&' {
			if end := strings.IndexByte(s[i:], ';'); end > 0 && end <= 10 {
				size = end + 1
			}
		}
		if size == 0 {
			r, rs := utf8.DecodeRuneInString(s[i:])
			size = rs
			if r >= 0x10000 {
				w = 2
			}
		}
		if width+w > n-1 {
			break
		}
		width += w
		i += size
		cut = i
	}
	var b strings.Builder
	b.WriteString(s[:cut])
	b.WriteString(more)
	open := openTags(s[:cut])
	for k := len(open) - 1; k >= 0; k-- {
		b.WriteString("</" + open[k] + ">")
	}
	return b.String()
}

// openTags returns the tags of s left open at its end, outermost first.
func openTags(s string) []string {
	var open []string
	for i := 0; i < len(s); {
		if s[i] != '<' {
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			break
		}
		tag := s[i+1 : i+end]
		if name, ok := strings.CutPrefix(tag, "/"); ok {
			name = strings.ToLower(strings.TrimSpace(name))
			if k := len(open); k > 0 && open[k-1] == name {
				open = open[:k-1]
			}
		} else {
			name, _, _ := strings.Cut(tag, " ")
			open = append(open, strings.ToLower(name))
		}
		i += end + 1
	}
	return open
}

// visible returns the length of s after entities parsing, in UTF-16 code
// units.
func visible(s string) int {
	n := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return n + utf8.RuneCountInString(s[i:])
			}
			i += end + 1
			continue
		case '&':
			if end := strings.IndexByte(s[i:], ';'); end > 0 && end <= 10 {
				n++
				i += end + 1
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n++
		if r >= 0x10000 {
			n++
		}
		i += size
	}
	return n
}
