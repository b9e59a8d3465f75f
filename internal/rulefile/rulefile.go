// Package rulefile reads the YAML nodes of relay's rules file into values and
// records every problem it finds with its file, line and field, so that a
// rules file with five mistakes is reported with five lines at once. The
// route parser reads routes with it, each sink type reads its options with it
// (through sinktype.Decoder), and the config package reads the tenants file
// with it.
package rulefile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var (
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// Error is one problem in a rules file: where it is and what is wrong. The
// route parser returns every problem it finds, joined with errors.Join; use
// errors.As, or Unwrap() []error on the joined error, to get at each one.
type Error struct {
	// File is the name of the rules file as given to the parser.
	File string
	// Line is the 1-based line of the offending key or value, 0 if unknown.
	Line int
	// Field is the path of the offending field, such as routes[1].to; empty
	// for problems of the whole file.
	Field string
	// Msg says what is wrong. It never contains a secret value.
	Msg string
}

// Error renders the problem as "route: rules.yaml:14: routes[1].to: sink
// "oncal" is not defined".
func (e *Error) Error() string { return e.Render("route: ") }

// Render renders the problem after prefix, as Error does with "route: ":
// the tenants file's problems start with "config: ".
func (e *Error) Render(prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Placeholder is the value relay route gives variables the environment does
// not set: it delivers nothing, so it needs no secret, and it shows the
// routing and rendering of rules whose secrets live elsewhere. Sink types
// skip their checks of a value's form for it (sinktype.Decoder.Placeholder).
const Placeholder = "https://unset.invalid/?unset=unset"

// Reader reads the nodes of one rules file and collects its problems. Each
// node it visits is charged against a budget, so that aliases expanding to
// aliases cannot make a small file take unbounded time.
type Reader struct {
	// File is the name of the rules file, for errors.
	File string
	// Lookup reads environment variables; it never returns a value into an
	// error.
	Lookup func(string) (string, bool)

	errs   []*Error
	budget int
	limit  int
	vars   []string
}

// NewReader returns a Reader of file that visits at most budget nodes; a
// nil lookup reads no variable.
func NewReader(file string, lookup func(string) (string, bool), budget int) *Reader {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return &Reader{File: file, Lookup: lookup, budget: budget, limit: budget}
}

// Errorf records a problem at line in field.
func (r *Reader) Errorf(line int, field, format string, args ...any) {
	r.errs = append(r.errs, &Error{File: r.File, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Err returns every problem recorded, in line order, each an *Error joined
// with errors.Join; nil when there is none.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(r.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	errs := make([]error, len(r.errs))
	for i, e := range r.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Variables returns the names of the environment variables read so far, in
// the order first read, set or not.
func (r *Reader) Variables() []string { return slices.Clone(r.vars) }

// Charge counts one visited node against the budget. Once the budget is
// spent it records the problem once and returns false.
func (r *Reader) Charge(n *yaml.Node, field string) bool {
	r.budget--
	if r.budget == -1 {
		r.Errorf(n.Line, field, "the file is too complex: more than %d YAML nodes with aliases expanded", r.limit)
	}
	return r.budget >= 0
}

// Pair is one key of a mapping and its value, aliases resolved.
type Pair struct {
	Key  string
	Line int
	Val  *yaml.Node
}

// Find returns the pair of key.
func Find(pairs []Pair, key string) (Pair, bool) {
	for _, kv := range pairs {
		if kv.Key == key {
			return kv, true
		}
	}
	return Pair{}, false
}

// Document decodes data into its one YAML document and returns the top-level
// node, or nil after recording why there is none: a syntax error at the line
// where it is, a second document, or an empty file, reported with empty (such
// as "the file is empty: want sinks and routes").
func (r *Reader) Document(data []byte, empty string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			r.Errorf(1, "", "%s", empty)
		} else {
			r.syntax(data, err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		r.syntax(data, err)
		return nil
	default:
		r.Errorf(extra.Line, "", "a second YAML document: want one document")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			r.Errorf(1, "", "%s", empty)
			return nil
		}
		root = Resolve(root.Content[0])
	}
	if IsNull(root) {
		r.Errorf(1, "", "%s", empty)
		return nil
	}
	return root
}

// syntax records a YAML syntax error at the line where it is. yaml.v3 names
// no line for some errors (control characters, bad UTF-8, an unknown anchor)
// and, for parser errors, the line where the enclosing block starts rather
// than the line that breaks it; so the line is found as the shortest run of
// leading lines that fails to decode for a reason other than ending early.
func (r *Reader) syntax(data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := syntaxLine(data)
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		msg = m[2]
		if line == 0 {
			// Only the whole file fails, as with an open quote: take the
			// line yaml.v3 names, which counts parser errors from 0.
			line, _ = strconv.Atoi(m[1])
			if slices.ContainsFunc(parserProblems, func(p string) bool { return strings.HasPrefix(msg, p) }) {
				line++
			}
		}
	}
	r.Errorf(line, "", "invalid YAML: %s", msg)
}

// parserProblems start the messages of yaml.v3's parser errors.
var parserProblems = []string{
	"did not find expected <", "did not find expected node content", "did not find expected key",
	"did not find expected '-' indicator", "did not find expected ',' or", "found duplicate %",
	"found incompatible YAML document", "found undefined tag handle",
}

// syntaxLine returns the 1-based line of the first syntax error of data, or
// 0 when decoding every prefix of whole lines shows none.
func syntaxLine(data []byte) int {
	ends := []int{}
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	// Binary search for the first prefix that is broken: a prefix that
	// breaks stays broken when lines are added.
	lo, hi := 0, len(ends) // the first lo lines are fine; hi lines are broken
	if !brokenPrefix(data[:ends[hi-1]]) {
		return 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if brokenPrefix(data[:ends[mid-1]]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// brokenPrefix reports whether data fails to decode for a reason that more
// lines cannot fix.
func brokenPrefix(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return !slices.ContainsFunc(endedEarly, func(s string) bool { return strings.Contains(err.Error(), s) })
		}
	}
}

// endedEarly are yaml.v3's messages for a document cut short: an open
// quote, flow collection or block scalar.
var endedEarly = []string{"end of stream", "did not find expected ',' or", "did not find expected node content",
	"could not find expected ':'", "found unexpected end", "did not find expected key"}

// Mapping returns the keys and values of a mapping node, reporting repeated
// keys, and unknown ones when known is not nil. A null node is an empty
// mapping.
func (r *Reader) Mapping(n *yaml.Node, field string, known []string) ([]Pair, bool) {
	if IsNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		r.Errorf(n.Line, field, "want a mapping, got %s", Describe(n))
		return nil, false
	}
	seen := map[string]int{}
	var out []Pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := Resolve(n.Content[i])
		if !r.Charge(k, field) {
			return nil, false
		}
		key := k.Value
		sub := Join(field, key)
		if k.Kind != yaml.ScalarNode {
			r.Errorf(k.Line, field, "want a plain key, got %s", Describe(k))
			continue
		}
		if known != nil && !slices.Contains(known, key) {
			r.Errorf(k.Line, sub, "unknown key %q (want one of %s)", key, strings.Join(known, ", "))
			continue
		}
		if first, dup := seen[key]; dup {
			r.Errorf(k.Line, sub, "repeated key: already set at line %d", first)
			continue
		}
		seen[key] = k.Line
		out = append(out, Pair{Key: key, Line: k.Line, Val: Resolve(n.Content[i+1])})
	}
	return out, true
}

// Sequence returns the items of a sequence node; a scalar stands for a
// sequence of one.
func (r *Reader) Sequence(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	switch n.Kind {
	case yaml.SequenceNode:
		items := make([]*yaml.Node, 0, len(n.Content))
		for _, c := range n.Content {
			c = Resolve(c)
			if !r.Charge(c, field) {
				return nil, false
			}
			items = append(items, c)
		}
		return items, true
	case yaml.ScalarNode:
		if IsNull(n) {
			r.Errorf(n.Line, field, "no value: want a list")
			return nil, false
		}
		return []*yaml.Node{n}, true
	}
	r.Errorf(n.Line, field, "want a list, got %s", Describe(n))
	return nil, false
}

// Str returns a non-empty scalar as written.
func (r *Reader) Str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		r.Errorf(n.Line, field, "want a string, got %s", Describe(n))
		return "", false
	}
	if IsNull(n) || strings.TrimSpace(n.Value) == "" {
		r.Errorf(n.Line, field, "no value: want a non-empty string")
		return "", false
	}
	return n.Value, true
}

// Bool returns a YAML boolean.
func (r *Reader) Bool(n *yaml.Node, field string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		r.Errorf(n.Line, field, "want true or false, got %s", Describe(n))
		return false, false
	}
	return b, true
}

// Duration returns a positive Go duration such as 30s or 48h.
func (r *Reader) Duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := r.Str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		r.Errorf(n.Line, field, "%q is not a positive duration: want a number with a unit, such as 30s, 10m or 48h", s)
		return 0, false
	}
	return d, true
}

// Env reads the environment variable named by n. The value is often a
// secret and never appears in an error. A name of relay's own variables
// (OwnVariable) is refused without being read.
func (r *Reader) Env(n *yaml.Node, field string) (name, value string, ok bool) {
	name, ok = r.Str(n, field)
	if !ok {
		return "", "", false
	}
	if !envRE.MatchString(name) {
		r.Errorf(n.Line, field, "%q is not an environment variable name", name)
		return "", "", false
	}
	if p := OwnVariable(name, "the sink", "OPS_WEBHOOK_SECRET"); p != "" {
		r.Errorf(n.Line, field, "%s", p)
		return "", "", false
	}
	if !slices.Contains(r.vars, name) {
		r.vars = append(r.vars, name)
	}
	value, set := r.Lookup(name)
	switch {
	case !set:
		r.Errorf(n.Line, field, "environment variable %s is not set", name)
		return "", "", false
	case strings.TrimSpace(value) == "":
		r.Errorf(n.Line, field, "environment variable %s is set but empty", name)
		return "", "", false
	}
	return name, value, true
}

// OwnPrefix starts the name of every variable relay reads for itself
// (config.Variables): its app secret, admin token and NATS credentials among
// them.
const OwnPrefix = "RELAY_"

// OwnVariable says why a file may not name the variable name, and how to fix
// that, when name is one of relay's own (it starts with OwnPrefix, in any
// case); "" otherwise. The rules file, which anyone who can edit a ConfigMap
// writes, would otherwise send relay's own secrets to a sink of its choice.
// who reads the variable ("the sink") and example names a variable it could
// have instead.
func OwnVariable(name, who, example string) string {
	if !strings.HasPrefix(strings.ToUpper(name), OwnPrefix) {
		return ""
	}
	return fmt.Sprintf("%s is one of relay's own variables, which no file may name (every %s variable is kept "+
		"for relay: its app secret, admin token and NATS credentials among them): give %s a variable of its own, "+
		"such as %s, and set that in relay's environment", name, OwnPrefix, who, example)
}

// ValidHTTPURL reports whether s is an http:// or https:// URL with a host.
func ValidHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Resolve follows aliases. yaml.v3 has already refused unknown anchors and
// alias cycles; a dangling alias is taken as null.
func Resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

// IsNull reports a missing or null node.
func IsNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// Join appends key to the field path.
func Join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// Describe names the kind of a node for an error, without its value.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "something else"
}
