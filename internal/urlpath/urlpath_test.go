package urlpath_test

import (
	"net/http"
	"net/http/httptest"
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
