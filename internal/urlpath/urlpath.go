// Package urlpath writes text from outside (an alarm's originId, a sink's
// name, a silence's id) as one segment of a URL path, so that the path
// names that text and nothing else: the console's links and forms, the ops
// API's clients and the CLI all build their paths with Segment.
package urlpath

import "net/url"

// Segment returns s escaped as one path segment: url.PathEscape, which
// escapes "/", "?", "#" and "%", and, for a segment that is exactly "." or
// "..", its dots as %2E. A ServeMux cleans the escaped path, so "." or ".."
// left as they are would be resolved away (a redirect to another path);
// %2E is not cleaned, and the pattern's {name} decodes it back to the dot.
func Segment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}
