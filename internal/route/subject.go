package route

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/template/parse"
	"time"
	"unicode"

	"github.com/relay-energy/relay/internal/event"
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

// RenderSubject renders the NATS subject of ev for a nats sink. Every value
// the template substitutes is sanitised with SanitizeToken, the flat fields
// of event.View and the fields of .Event alike, and the result is checked to
// be a publishable subject: no empty token, no wildcard, no white space.
func (s Sink) RenderSubject(ev *event.Event) (string, error) {
	if s.subject == nil {
		return "", fmt.Errorf("route: sink %q has no compiled subject template: build sinks with route.Parse or route.Load", s.Name)
	}
	subject, err := execSubject(s.subject, ev, !s.plainSubject)
	if err != nil {
		return "", fmt.Errorf("route: sink %q: subject of event %s: %w", s.Name, ev.ID, err)
	}
	return subject, nil
}

func execSubject(t *boundedTemplate, ev *event.Event, withEvent bool) (string, error) {
	v := ev.View()
	v.TenantID = SanitizeToken(v.TenantID)
	v.StationID = SanitizeToken(v.StationID)
	v.SystemID = SanitizeToken(v.SystemID)
	v.DeviceSN = SanitizeToken(v.DeviceSN)
	v.OriginID = SanitizeToken(v.OriginID)
	v.EventCode = SanitizeToken(v.EventCode)
	v.LevelName = SanitizeToken(v.LevelName)
	v.Transition = event.Transition(SanitizeToken(string(v.Transition)))
	if withEvent {
		c := sanitizedEvent(ev)
		v.Event = &c
	}
	subject, err := t.execute(v)
	if err != nil {
		return "", err
	}
	if err := checkSubject(subject); err != nil {
		return "", err
	}
	return subject, nil
}

// sanitizedEvent returns a copy of ev with every string field sanitised;
// the raw upstream record is left as received.
func sanitizedEvent(ev *event.Event) event.Event {
	c := *ev
	for _, f := range []*string{&c.SpecVersion, &c.ID, &c.Source, &c.Type, &c.Subject, &c.Time, &c.DataContentType,
		&c.Data.LevelName, &c.Data.OriginID, &c.Data.EventCode, &c.Data.EventDesc, &c.Data.EventType,
		&c.Data.TenantID, &c.Data.StationID, &c.Data.StationName, &c.Data.SystemID, &c.Data.DeviceSN,
		&c.Data.DeviceName, &c.Data.DeviceTemplateCode, &c.Data.OccurredAt, &c.Data.RecoveredAt, &c.Data.DetectedAt} {
		*f = SanitizeToken(*f)
	}
	c.Data.Transition = event.Transition(SanitizeToken(string(c.Data.Transition)))
	return c
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

// compileSubject parses a subject template and renders it once against a
// sample event, which catches unknown fields and literal text that makes a
// bad subject. plain reports that it reads only the flat fields of the view.
func compileSubject(text string) (t *boundedTemplate, plain bool, err error) {
	t, err = parseBounded("subject", text)
	if err != nil {
		return nil, false, err
	}
	plain = true
	for _, tt := range t.t.Templates() {
		if tt.Tree != nil && readsEvent(tt.Root) {
			plain = false
		}
	}
	for _, sample := range event.Samples() {
		if _, err := execSubject(t, &sample, !plain); err != nil {
			return nil, false, fmt.Errorf("on a sample %s event: %w", sample.Data.Transition, err)
		}
	}
	return t, plain, nil
}

// readsEvent reports whether a template may read .Event (or the whole view),
// so that RenderSubject must sanitise a copy of the event.
func readsEvent(n parse.Node) bool {
	switch n := n.(type) {
	case nil:
		return false
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if readsEvent(c) {
				return true
			}
		}
		return false
	case *parse.ActionNode:
		return readsEvent(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if readsEvent(c) {
				return true
			}
		}
		return false
	case *parse.CommandNode:
		for _, a := range n.Args {
			if readsEvent(a) {
				return true
			}
		}
		return false
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

// redactURL returns scheme://host and, when withPath, the path, leaving out
// credentials and the query; for an unparsable URL, "(invalid URL)".
func redactURL(raw string, withPath bool) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	out := u.Scheme + "://" + u.Host
	if withPath {
		out += u.EscapedPath()
		if u.RawQuery != "" {
			out += "?…"
		}
	}
	return out
}
