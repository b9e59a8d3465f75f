package nats

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template/parse"
	"unicode"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/tmpl"
)

// SanitizeToken makes s safe to substitute into a NATS subject as (part of)
// one token: '.', '*', '>', white space and control characters become '_',
// and an empty string becomes "_".
func SanitizeToken(s string) string {
	if s == "" {
		return "_"
	}
	i := strings.IndexFunc(s, unsafeInSubject)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if unsafeInSubject(r) {
			b.WriteByte('_')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeInSubject(r rune) bool {
	return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r)
}

// DefaultSubject is the subject template of a nats sink without subject.
const DefaultSubject = "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}"

// Subject is a compiled subject template. Render sanitises every value it
// substitutes and checks that the result is a publishable subject. It is
// safe for concurrent use.
type Subject struct {
	text string
	t    *tmpl.Template
	// plain is true when the template reads only the flat fields of the
	// view, so Render need not sanitise a copy of the whole event.
	plain bool
}

// Text returns the template as written.
func (s *Subject) Text() string { return s.text }

// Render renders the NATS subject of ev. Every value the template
// substitutes is sanitised with SanitizeToken, the flat fields of
// event.View and the fields of .Event alike, and the result is checked to be
// a publishable subject: no empty token, no wildcard, no white space, no $.
func (s *Subject) Render(ev *event.Event) (string, error) {
	subject, err := s.t.Execute(ev.MappedView(SanitizeToken, !s.plain))
	if err != nil {
		return "", fmt.Errorf("subject of event %s: %w", ev.ID, err)
	}
	if err := checkSubject(subject); err != nil {
		return "", fmt.Errorf("subject of event %s: %w", ev.ID, err)
	}
	return subject, nil
}

// checkSubject reports why s cannot be published to, if it cannot.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("renders to an empty subject")
	}
	if strings.HasPrefix(s, "$") {
		return fmt.Errorf("renders to %q: subjects starting with $ belong to NATS itself ($JS.API, $KV, $SYS), and publishing there can change or delete streams", s)
	}
	for tok := range strings.SplitSeq(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("renders to %q, which has an empty token", s)
		case tok == "*" || tok == ">":
			return fmt.Errorf("renders to %q, which is a wildcard subject", s)
		case strings.IndexFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("renders to %q, which contains white space", s)
		}
	}
	return nil
}

// CompileSubject parses a subject template and renders it once against a
// sample event, which catches unknown fields and literal text that makes a
// bad subject.
func CompileSubject(text string) (*Subject, error) {
	t, err := tmpl.Parse("subject", text)
	if err != nil {
		return nil, err
	}
	s := &Subject{text: text, t: t, plain: true}
	for _, tree := range t.Trees() {
		if readsEvent(tree.Root) {
			s.plain = false
		}
	}
	for _, sample := range event.Samples() {
		if _, err := s.Render(&sample); err != nil {
			return nil, fmt.Errorf("on a sample %s event: %w", sample.Data.Transition, err)
		}
	}
	return s, nil
}

// readsEvent reports whether a template may read .Event (or the whole view),
// so that Render must sanitise a copy of the event.
func readsEvent(n parse.Node) bool {
	switch n := n.(type) {
	case nil:
		return false
	case *parse.ListNode:
		return n != nil && slices.ContainsFunc(n.Nodes, readsEvent)
	case *parse.ActionNode:
		return readsEvent(n.Pipe)
	case *parse.PipeNode:
		return n != nil && slices.ContainsFunc(n.Cmds, func(c *parse.CommandNode) bool { return readsEvent(c) })
	case *parse.CommandNode:
		return slices.ContainsFunc(n.Args, readsEvent)
	case *parse.FieldNode:
		return len(n.Ident) > 0 && n.Ident[0] == "Event"
	case *parse.VariableNode:
		return len(n.Ident) > 0 && n.Ident[0] == "$" && (len(n.Ident) == 1 || n.Ident[1] == "Event")
	case *parse.ChainNode:
		return readsEvent(n.Node)
	case *parse.DotNode:
		return true
	case *parse.IfNode:
		return readsEvent(n.Pipe) || readsEvent(n.List) || readsEvent(n.ElseList)
	case *parse.RangeNode:
		return readsEvent(n.Pipe) || readsEvent(n.List) || readsEvent(n.ElseList)
	case *parse.WithNode:
		return readsEvent(n.Pipe) || readsEvent(n.List) || readsEvent(n.ElseList)
	case *parse.TemplateNode:
		return true
	}
	return false
}

// streamSubject returns the subject filter of the stream create_stream
// makes for a subject template: the template's leading literal tokens
// followed by '>', such as "energy.alarms.>" for
// "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}";
// a template without actions is its own filter.
func streamSubject(templateText string) (string, error) {
	if !strings.Contains(templateText, "{{") && checkSubject(templateText) == nil {
		return templateText, nil
	}
	var lit []string
	for _, tok := range strings.Split(templateText, ".") {
		if strings.Contains(tok, "{{") || tok == "" || tok == "*" || tok == ">" {
			break
		}
		lit = append(lit, tok)
	}
	if len(lit) == 0 {
		return "", fmt.Errorf("subject template %s starts with no literal token, so the stream to create would capture every subject", strconv.Quote(templateText))
	}
	if checkSubject(strings.Join(lit, ".")) != nil {
		return "", fmt.Errorf("subject template %s: its literal prefix is not a valid subject", strconv.Quote(templateText))
	}
	return strings.Join(lit, ".") + ".>", nil
}
