package urlpath_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/urlpath"
)

// TestSegmentRoutesToTheTextItEscapes: a path built with Segment reaches
// the pattern's {id} with the very text escaped, whatever it holds, on a
// ServeMux that cleans paths.
func TestSegmentRoutesToTheTextItEscapes(t *testing.T) {
	mux := http.NewServeMux()
	var got string
	mux.HandleFunc("POST /alarms/{id}/ack", func(w http.ResponseWriter, r *http.Request) { got = r.PathValue("id") })
	for _, id := range []string{"A1", ".", "..", "...", "a/b", "../x", "a?b#c", "%2F", "%", "a b", "\u202eA", "x\u200b", "<script>"} {
		got = ""
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/alarms/"+urlpath.Segment(id)+"/ack", nil))
		if rec.Code != http.StatusOK || got != id {
			t.Errorf("id %q: path /alarms/%s/ack answered %d with id %q", id, urlpath.Segment(id), rec.Code, got)
		}
	}
}

// dotSegment reports whether a browser takes the path segment seg as "."
// or "..": the URL standard's single- and double-dot segments, "%2e" in
// any case counting as a dot.
func dotSegment(seg string) bool {
	switch strings.ToLower(seg) {
	case ".", "%2e", "..", ".%2e", "%2e.", "%2e%2e":
		return true
	}
	return false
}

// TestLinkIsNoDotSegmentAndReadsBack: a segment written by Link is never
// one a browser resolves away, routes to the pattern's {id}, and reads
// back with FromLink to the very text, different texts to different
// segments.
func TestLinkIsNoDotSegmentAndReadsBack(t *testing.T) {
	mux := http.NewServeMux()
	var got string
	mux.HandleFunc("POST /alarms/{id}/ack", func(w http.ResponseWriter, r *http.Request) { got = urlpath.FromLink(r.PathValue("id")) })
	seen := map[string]string{}
	for _, id := range []string{"A1", ".", "..", "...", "~", "~.", "~..", "~~", ".~", "%2E", "%2e%2E", "a/b", "../x", "a?b#c", "%2F", "%", "a b", "\u202eA", "x\u200b", "<script>"} {
		seg := urlpath.Link(id)
		if dotSegment(seg) {
			t.Errorf("id %q: Link wrote %q, which a browser resolves as a dot segment", id, seg)
		}
		if other, dup := seen[seg]; dup {
			t.Errorf("ids %q and %q: Link wrote both as %q", other, id, seg)
		}
		seen[seg] = id
		got = ""
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/alarms/"+seg+"/ack", nil))
		if rec.Code != http.StatusOK || got != id {
			t.Errorf("id %q: path /alarms/%s/ack answered %d with id %q", id, seg, rec.Code, got)
		}
	}
}
