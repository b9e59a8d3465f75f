package console

import (
	"net/url"
	"regexp"
	"strings"
)

// urlInText finds the URLs in a text.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// HideURLPaths returns text with every URL in it cut to its scheme and
// host, "scheme://host/…" when it had more: a webhook whose path is its
// secret (a Discord or Zapier hook, a chat robot's token) must not reach a
// page a viewer reads through a sink's target or a transport error that
// quotes the URL. Credentials before the host go too; an unparsable URL
// becomes "(URL)".
func HideURLPaths(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(raw string) string {
		// Punctuation that ends a sentence or a quotation is not the URL's.
		trimmed := strings.TrimRight(raw, ".,:;)")
		tail := raw[len(trimmed):]
		u, err := url.Parse(trimmed)
		if err != nil || u.Host == "" {
			return "(URL)" + tail
		}
		shown := u.Scheme + "://" + u.Host
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			shown += "/…"
		}
		return shown + tail
	})
}
