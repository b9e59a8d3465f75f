package svgplot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// TestTextIsEscapedAndTakesItsOwnFill: text from anywhere (a station name,
// a note) cannot break the document, and a fill given replaces the default
// instead of doubling the attribute, which XML forbids.
func TestTextIsEscapedAndTakesItsOwnFill(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, 200, 100, 10, 10, 10, 10)
	p.Title(`a <title> & "quotes"`)
	p.Text(5, 5, "</svg><script>", `fill="#ff0000"`)
	p.VGrid(50, "x<1")
	p.HGrid(50, "y>1")
	p.Polyline([]Point{{1, 2}, {3, 4}}, "#000000", `stroke-width="2"`)
	p.Frame()
	p.XLabel("x & y")
	p.YLabel("y & x")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b.String())
		}
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
			texts = append(texts, string(cd))
		}
	}
	want := []string{`a <title> & "quotes"`, "</svg><script>", "x<1", "y>1", "x & y", "y & x"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("texts %q, want %q", texts, want)
	}
	if strings.Contains(b.String(), "<script") {
		t.Fatal("text became markup")
	}
}

// TestADescribedChartNamesItselfForAssistiveTechnology: the chart's title
// and description come first, escaped, and a titled line carries its own.
func TestADescribedChartNamesItselfForAssistiveTechnology(t *testing.T) {
	var b bytes.Buffer
	p := NewDescribed(&b, 200, 100, 10, 10, 10, 10, "alarms <per> hour", `a & "b"`)
	p.TitledLine(0, 50, 200, 50, "#000000", "flood </title><script>", `class="flood-line"`)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, b.String())
	}
	s := b.String()
	for _, want := range []string{`role="img" class="chart">` + "\n<title>alarms &lt;per&gt; hour</title>\n<desc>a &amp; &#34;b&#34;</desc>",
		`class="flood-line"><title>flood &lt;/title&gt;&lt;script&gt;</title></line>`} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in:\n%s", want, s)
		}
	}
}
