package dingtalk_test

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/dingtalk"
)

// hostile are upstream names that hold markup: entities, tags, Markdown.
var hostile = []string{
	"Tank &amp; pump", "&lt;b&gt;not bold&lt;/b&gt;", "<b>bold</b>", "AT&T", "&#42;star&#42;", "&copy; 2026",
	"*x* _y_ `z` [link](https://evil.example)", `back\slash \&amp;`, "<font color=red>red</font>", "&&amp;&",
}

// backslashed is a Markdown backslash escape.
var backslashed = regexp.MustCompile(`\\(.)`)

// shown is what DingTalk's Markdown shows of s as text: backslash escapes
// resolved, then HTML character references.
func shown(s string) string { return html.UnescapeString(backslashed.ReplaceAllString(s, "$1")) }

// TestEscapeShowsUpstreamTextLiterally: an alarm name holding an entity, a
// tag or Markdown is shown as it was sent, not as what it encodes.
func TestEscapeShowsUpstreamTextLiterally(t *testing.T) {
	for _, in := range hostile {
		out := dingtalk.Escape(in)
		if got := shown(out); got != in {
			t.Errorf("Escape(%q) = %q, shown as %q", in, out, got)
		}
		if strings.ContainsAny(out, "<>") {
			t.Errorf("Escape(%q) = %q holds a tag", in, out)
		}
	}
	if got, want := dingtalk.Escape("Tank &amp; pump <b>1</b>"), "Tank &amp;amp; pump &lt;b&gt;1&lt;/b&gt;"; got != want {
		t.Errorf("Escape = %q, want %q", got, want)
	}
}
