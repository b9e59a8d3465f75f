// Package urlpath writes text from outside (an alarm's originId, a sink's
// name, a silence's id) as one segment of a URL path, so that the path
// names that text and nothing else: the ops API's clients and the CLI
// build their paths with Segment, the console's links and forms with Link,
// which a browser cannot resolve as a dot segment.
package urlpath

import (
	"net/url"
	"strings"
)

// Segment returns s escaped as one path segment: url.PathEscape, which
// escapes "/", "?", "#" and "%", and, for a segment that is exactly "." or
// "..", its dots as %2E. A ServeMux cleans the escaped path, so "." or ".."
// left as they are would be resolved away (a redirect to another path);
// %2E is not cleaned, and the pattern's {name} decodes it back to the dot.
//
// A browser is another matter: the URL standard counts "%2e" and "%2e%2e"
// (any case) as dot segments too, so a link or a form's action in a page
// is written with Link instead.
func Segment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// Marker begins a segment that Link wrote for text a browser would
// otherwise resolve as a dot segment ("." or ".."), and for text that
// begins with Marker itself, so that FromLink can tell the two apart:
// "." is written "~.", ".." "~..", "~x" "~~x", and FromLink takes one
// Marker away from each.
const Marker = "~"

// Link returns s escaped as one path segment of a link or a form's action
// in a page: Segment's escaping, and Marker before "." and ".." (which
// browsers resolve away however they are escaped) and before text that
// begins with Marker. The handler reads the segment back with FromLink.
func Link(s string) string {
	if s == "." || s == ".." || strings.HasPrefix(s, Marker) {
		return Marker + url.PathEscape(s)
	}
	return url.PathEscape(s)
}

// FromLink returns the text a segment written by Link names, given the
// segment as the ServeMux decoded it (r.PathValue): one leading Marker
// taken away. A segment written by Segment reads back the same unless its
// text begins with Marker.
func FromLink(v string) string {
	return strings.TrimPrefix(v, Marker)
}
