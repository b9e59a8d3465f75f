package feishu_test

import (
	"html"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/feishu"
)

// hostile are upstream names that hold markup: entities, tags, Markdown.
var hostile = []string{
	"Tank &amp; pump", "&lt;b&gt;not bold&lt;/b&gt;", "<b>bold</b>", "AT&T", "&#42;star&#42;", "&copy; 2026",
	"*x* _y_ ~z~ `c` [link](https://evil.example)", `back\slash`, "<at id=all></at>", "&&amp;&",
}

// TestEscapeShowsUpstreamTextLiterally: an alarm name holding an entity, a
// tag or Markdown is shown as it was sent in a card's lark_md, which reads
// &lt;, &gt;, &amp; and numeric character references, not as what it
// encodes.
func TestEscapeShowsUpstreamTextLiterally(t *testing.T) {
	for _, in := range hostile {
		out := feishu.Escape(in)
		if got := html.UnescapeString(out); got != in {
			t.Errorf("Escape(%q) = %q, shown as %q", in, out, got)
		}
		if strings.ContainsAny(out, "<>*_~`[]\\") {
			t.Errorf("Escape(%q) = %q holds markup", in, out)
		}
	}
	if got, want := feishu.Escape("Tank &amp; pump <b>1</b>"), "Tank &amp;amp; pump &lt;b&gt;1&lt;/b&gt;"; got != want {
		t.Errorf("Escape = %q, want %q", got, want)
	}
}
