// Package tmpl runs the Go text/templates of a rules file (NATS subjects,
// message titles and texts) within bounds of steps, output and time, so that
// an operator's typo or a hostile ConfigMap cannot hold a CPU or gigabytes at
// check, at every reload and at every event.
package tmpl

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Bounds of one template execution: without them one template ({{range
// 2000000000}}, nested ranges, a printf width of a billion) holds a CPU or
// gigabytes.
const (
	// MaxSteps bounds the range iterations and template calls of
	// one execution.
	MaxSteps = 10_000
	// MaxOutput bounds the bytes one execution writes.
	MaxOutput = 64 << 10
	// MaxTime bounds the time one execution takes.
	MaxTime = 100 * time.Millisecond
	// maxFormatWidth bounds the width and precision of printf verbs, which
	// fmt allocates before anything is written.
	maxFormatWidth = 256
)

// stepFunc is the function the bound puts at the head of every range body
// and every defined template; it fails once the execution's budget is spent.
const stepFunc = "relayStep"

// ErrBounds is matched by errors.Is against an execution stopped by
// a bound.
var ErrBounds = errors.New("template exceeds its bounds")

// Template is a parsed template whose executions are bounded in steps,
// output and time. It is safe for concurrent use.
type Template struct {
	t *template.Template
	// loops is set when the template has ranges or template calls: only
	// then does an execution need its own step counter.
	loops bool
}

// Parse parses text as a template named name, with missing keys an error,
// and instruments it for the bounds.
func Parse(name, text string) (*Template, error) {
	funcs := template.FuncMap{
		stepFunc: func() (string, error) { return "", nil },
		"printf": boundedSprintf,
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	b := &Template{t: t}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		if tt.Name() != name {
			// A defined template may call itself: count each call.
			b.loops = true
			tt.Root.Nodes = append([]parse.Node{stepNode()}, tt.Root.Nodes...)
		}
		b.loops = instrument(tt.Tree, tt.Root) || b.loops
	}
	return b, nil
}

// stepList is the parsed {{relayStep}}: parse.Tree builds nodes only while
// parsing, so the step's nodes are copied from it.
var stepList = template.Must(template.New("step").Funcs(template.FuncMap{stepFunc: func() string { return "" }}).
	Parse("{{" + stepFunc + "}}")).Tree.Root

func stepNode() parse.Node { return stepList.Nodes[0].Copy() }

// instrument puts a step at the head of every range body under n and
// reports whether there was any range or template call.
func instrument(tree *parse.Tree, n parse.Node) bool {
	found := false
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			found = instrument(tree, c) || found
		}
	case *parse.RangeNode:
		found = true
		if n.List == nil {
			n.List = stepList.CopyList()
			n.List.Nodes = nil
		}
		instrument(tree, n.List)
		instrument(tree, n.ElseList)
		n.List.Nodes = append([]parse.Node{stepNode()}, n.List.Nodes...)
	case *parse.IfNode:
		found = instrument(tree, n.List) || instrument(tree, n.ElseList)
	case *parse.WithNode:
		found = instrument(tree, n.List) || instrument(tree, n.ElseList)
	case *parse.TemplateNode:
		found = true
	}
	return found
}

// Execute runs the template on data into a string, within the bounds; an
// execution stopped by a bound returns an error matching ErrBounds.
func (b *Template) Execute(data any) (string, error) {
	t := b.t
	start := time.Now()
	if b.loops {
		var err error
		if t, err = t.Clone(); err != nil {
			return "", err
		}
		steps := 0
		t.Funcs(template.FuncMap{stepFunc: func() (string, error) {
			steps++
			switch {
			case steps > MaxSteps:
				return "", fmt.Errorf("%w: more than %d range iterations and template calls", ErrBounds, MaxSteps)
			case steps%64 == 0 && time.Since(start) > MaxTime:
				return "", fmt.Errorf("%w: runs longer than %s", ErrBounds, MaxTime)
			}
			return "", nil
		}})
	}
	w := &limitedWriter{}
	if err := t.Execute(w, data); err != nil {
		if w.over {
			return "", fmt.Errorf("%w: writes more than %d bytes", ErrBounds, MaxOutput)
		}
		return "", err
	}
	return w.b.String(), nil
}

// Trees returns the parse trees of the template and of the templates it
// defines, for callers that inspect what a template reads.
func (b *Template) Trees() []*parse.Tree {
	var out []*parse.Tree
	for _, tt := range b.t.Templates() {
		if tt.Tree != nil {
			out = append(out, tt.Tree)
		}
	}
	return out
}

// limitedWriter keeps what is written up to MaxOutput bytes, and
// fails the write that goes past it.
type limitedWriter struct {
	b    strings.Builder
	over bool
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxOutput {
		w.over = true
		return 0, io.ErrShortWrite
	}
	return w.b.Write(p)
}

// boundedSprintf is printf with widths and precisions up to maxFormatWidth.
func boundedSprintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		n := 0
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return "", fmt.Errorf("%w: printf width or precision from an argument (*)", ErrBounds)
			case c >= '0' && c <= '9':
				n = n*10 + int(c-'0')
				if n > maxFormatWidth {
					return "", fmt.Errorf("%w: printf width or precision over %d", ErrBounds, maxFormatWidth)
				}
				continue
			case c == '.' || c == '[' || c == ']' || strings.IndexByte("+-# ", c) >= 0:
				n = 0
				continue
			}
			break
		}
	}
	return fmt.Sprintf(format, args...), nil
}
