package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/manage"
)

// control is one link or form of a page, as a browser would follow it.
type control struct {
	// Method is GET for a link, the form's method for a form.
	Method string
	// Target is the address the browser asks for, resolved against the
	// page's.
	Target *url.URL
	// Form is the form's fields (hidden inputs, checked boxes); Label the
	// link's text or the form's button's.
	Form  url.Values
	Label string
}

// parsePage parses an HTML page, failing the test when it does not parse.
func parsePage(t testing.TB, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the page does not parse: %v", err)
	}
	return doc
}

// each calls fn with n and every node below it, in document order.
func each(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		each(c, fn)
	}
}

// attr returns n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text returns the text below n, as a reader sees it.
func text(n *html.Node) string {
	var b strings.Builder
	each(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// controls returns the links and forms below n, resolved against base.
func controls(t testing.TB, n *html.Node, base *url.URL) []control {
	t.Helper()
	var out []control
	each(n, func(c *html.Node) {
		if c.Type != html.ElementNode {
			return
		}
		switch c.Data {
		case "a":
			if href := attr(c, "href"); href != "" {
				out = append(out, control{Method: http.MethodGet, Target: resolve(t, base, href), Label: strings.TrimSpace(text(c))})
			}
		case "form":
			f := control{Method: strings.ToUpper(attr(c, "method")), Target: resolve(t, base, attr(c, "action")), Form: url.Values{}}
			if f.Method == "" {
				f.Method = http.MethodGet
			}
			each(c, func(in *html.Node) {
				switch {
				case in.Type != html.ElementNode:
				case in.Data == "input" && (attr(in, "type") == "hidden" || attr(in, "type") == "checkbox"):
					f.Form.Add(attr(in, "name"), attr(in, "value"))
				case in.Data == "button":
					f.Label = strings.TrimSpace(text(in))
				}
			})
			out = append(out, f)
		}
	})
	return out
}

// resolve resolves a link's reference as a browser does.
func resolve(t testing.TB, base *url.URL, ref string) *url.URL {
	t.Helper()
	u, err := url.Parse(ref)
	if err != nil {
		t.Fatalf("link %q does not parse: %v", ref, err)
	}
	return base.ResolveReference(u)
}

// rowsByStation returns the rows of the Now page's table by the text of
// their station cell (the station's id while it has no name).
func rowsByStation(t testing.TB, page string) map[string]*html.Node {
	t.Helper()
	rows := map[string]*html.Node{}
	each(parsePage(t, page), func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "tr" || !strings.HasPrefix(attr(n, "id"), "alarm-") {
			return
		}
		var cells []*html.Node
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == "td" {
				cells = append(cells, c)
			}
		}
		if len(cells) > 3 {
			rows[text(cells[3])] = n
		}
	})
	return rows
}

// submit sends the form or follows the link f as a browser of s would,
// with the Origin of the page, and returns the answer with its body.
func (s *site) submit(c *http.Client, f control) (*http.Response, string) {
	s.t.Helper()
	var body *strings.Reader
	if f.Method == http.MethodPost {
		body = strings.NewReader(f.Form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(f.Method, f.Target.String(), body)
	if err != nil {
		s.t.Fatal(err)
	}
	if f.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.srv.URL)
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, string(b)
}

// acked returns whether each ongoing alarm is acknowledged, by originId.
func acked(t testing.TB, m *manage.Manager) map[string]bool {
	t.Helper()
	as, err := m.Alarms()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range as {
		out[a.OriginID] = a.Acknowledged
	}
	return out
}

// TestNowAcknowledgeOfAnIDWithAPathActsOnThatAlarmAlone: an upstream alarm
// whose originId is A2/ack?x= gets an Acknowledge button that acknowledges
// it, not urgent alarm A2 (on the code before the fix, the form posted to
// /console/alarms/A2/ack?x=/ack and acknowledged A2).
func TestNowAcknowledgeOfAnIDWithAPathActsOnThatAlarmAlone(t *testing.T) {
	const hostile = "A2/ack?x="
	s := newSite(t, console.Options{AdminToken: adminToken}, false,
		record("A2", 0, "S-urgent", "D1", 5), record(hostile, 3, "S-hostile", "D2", 5))
	c := s.browser()
	page := s.login(c, adminToken, "li.wei")
	row := rowsByStation(t, page)["S-hostile"]
	if row == nil {
		t.Fatalf("no row of station S-hostile on the Now page:\n%s", page)
	}
	base, _ := url.Parse(s.srv.URL + "/console/")
	var ack *control
	for _, f := range controls(t, row, base) {
		if f.Label == "Acknowledge" {
			ack = &f
		}
	}
	if ack == nil {
		t.Fatalf("no Acknowledge button in the row of %s", hostile)
	}
	if resp, body := s.submit(c, *ack); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("Acknowledge of %s (%s %s): %s\n%s", hostile, ack.Method, ack.Target, resp.Status, body)
	}
	if got := acked(t, s.mgr); got["A2"] || !got[hostile] {
		t.Fatalf("after the Acknowledge button of %s (posted to %s): acknowledged %v, want %s alone", hostile, ack.Target, got, hostile)
	}
}
