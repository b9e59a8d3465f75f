package route

import "testing"

// TestMarkdownTextKeepsTheTableAndShowsURLsAsValues: a sink's doc written
// into a cell of the reference neither breaks the table nor hides a <word>
// as HTML, and a URL in it is a value, not a link.
func TestMarkdownTextKeepsTheTableAndShowsURLsAsValues(t *testing.T) {
	for in, want := range map[string]string{
		"a | b":                          `a \| b`,
		"whsec_<base64> or any string":   `whsec_\<base64> or any string`,
		"URL, https://h.example/<t>, or": "URL, `https://h.example/<t>`, or",
		"(default https://h.example/v2)": "(default `https://h.example/v2`)",
	} {
		if got := markdownText(in); got != want {
			t.Errorf("markdownText(%q) = %q, want %q", in, got, want)
		}
	}
}
