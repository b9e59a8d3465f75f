package console_test

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/store"
)

var (
	deadRow  = regexp.MustCompile(`<tr id="dl-hook-(\d+)"`)
	nextLink = regexp.MustCompile(`<a href="([^"]*)" rel="next">`)
)

// TestConsoleDeadLettersPageAHundredAtATime: a sink with 250 dead letters
// is shown 100 at a time, oldest first, each page linking to the next
// (newer) one and back to the oldest, every dead letter on exactly one
// page; the page of all sinks shows the first 100 with the same link.
func TestConsoleDeadLettersPageAHundredAtATime(t *testing.T) {
	_, h, ck := deadLetterSiteOf(t, 250, 100)
	seen := map[string]bool{}
	var sizes []int
	path := "/console/deadletters?sink=hook"
	for path != "" {
		code, page := serve(h, ck, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, page)
		}
		rows := deadRow.FindAllStringSubmatch(page, -1)
		sizes = append(sizes, len(rows))
		last := ""
		for _, r := range rows {
			if seen[r[1]] {
				t.Fatalf("GET %s: dead letter %s shown again", path, r[1])
			}
			if last != "" && len(r[1]) == len(last) && r[1] < last {
				t.Fatalf("GET %s: dead letter %s after %s, want oldest first", path, r[1], last)
			}
			seen[r[1]], last = true, r[1]
		}
		if len(sizes) > 1 && !strings.Contains(page, `">oldest</a>`) {
			t.Errorf("GET %s: no link back to the oldest", path)
		}
		path = ""
		if m := nextLink.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
		if len(sizes) > 5 {
			t.Fatal("more than 5 pages")
		}
	}
	if len(seen) != 250 || len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("pages of %v rows, %d dead letters seen; want 100, 100, 50 and all 250", sizes, len(seen))
	}
	code, page := serve(h, ck, "/console/deadletters")
	if n := len(deadRow.FindAllString(page, -1)); code != http.StatusOK || n != 100 || nextLink.FindString(page) == "" ||
		!strings.Contains(page, "250 dead letter(s), 100 shown") {
		t.Fatalf("GET /console/deadletters: %d, %d rows; want 100 of 250 and a next link", code, n)
	}
	for _, bad := range []string{"/console/deadletters?after=12", "/console/deadletters?sink=hook&after=x"} {
		if code, page := serve(h, ck, bad); code != http.StatusBadRequest || !strings.Contains(page, "after=") {
			t.Errorf("GET %s: %d %s, want 400 naming after", bad, code, page)
		}
	}
}

// TestConsoleDeadLetterPagesReadNoOtherLetter: the Show page of one dead
// letter, and a page of the list, allocate about as much with 400 dead
// letters at the sink as with 120: they do not decode the others.
func TestConsoleDeadLetterPagesReadNoOtherLetter(t *testing.T) {
	allocs := func(n int) (show, list float64) {
		_, h, ck := deadLetterSiteOf(t, n, 2000)
		get := func(path string) func() {
			return func() {
				if code, page := serve(h, ck, path); code != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, code, page)
				}
			}
		}
		return testing.AllocsPerRun(5, get("/console/deadletters/hook/60")),
			testing.AllocsPerRun(5, get("/console/deadletters?sink=hook"))
	}
	show120, list120 := allocs(120)
	show400, list400 := allocs(400)
	if show400 > show120+50 || list400 > list120+50 {
		t.Fatalf("allocations with 400 dead letters: show %v, list %v; with 120: %v, %v; want about as many",
			show400, list400, show120, list120)
	}
}

// TestConsoleDeadLettersSayWhatWasDiscarded: a sink past its limit loses
// its oldest alarms' dead letters, and its section says how many went and
// where they are listed.
func TestConsoleDeadLettersSayWhatWasDiscarded(t *testing.T) {
	_, h, ck := deadLetterSiteWith(t, store.Options{DeadLetterLimit: 3}, 5, 100)
	code, page := serve(h, ck, "/console/deadletters")
	if code != http.StatusOK {
		t.Fatalf("GET /console/deadletters: %d", code)
	}
	if n := len(deadRow.FindAllString(page, -1)); n != 3 ||
		!strings.Contains(page, "2 dead letter(s) of this sink were discarded since relay started: it held more than 3") ||
		!strings.Contains(page, "relay deadletters withheld") {
		t.Fatalf("GET /console/deadletters: %d rows, want 3 and a note that 2 were discarded:\n%s", n, page)
	}
}
