package route

import (
	"bytes"
	"cmp"
	"encoding/base64"
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

	"github.com/relay-energy/relay/internal/event"
)

// nodeBudget bounds how many YAML nodes one Parse visits, so that aliases
// expanding to aliases cannot make a small file take unbounded time.
const nodeBudget = 200_000

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	streamRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// Keys of every sink, and the options of each sink type.
var (
	sinkCommonKeys = []string{"name", "type", "max_age", "max_retry_after"}
	sinkTypeKeys   = map[string][]string{
		TypeNATS:    {"subject", "jetstream", "create_stream"},
		TypeSlack:   {"channel", "webhook_url", "webhook_url_env"},
		TypeWebhook: {"url", "headers", "secret_env", "timeout"},
		TypeConsole: nil,
	}
	sinkTypes     = []string{TypeNATS, TypeSlack, TypeWebhook, TypeConsole}
	topKeys       = []string{"sinks", "routes"}
	routeKeys     = []string{"name", "match", "to", "continue"}
	matchKeys     = []string{"transitions", "levels", "tenant_ids", "station_ids", "system_ids", "device_sns", "device_types", "event_codes", "event_types", "station_names", "device_names"}
	reservedHeads = []string{"content-type", "content-length", "host", "webhook-id", "webhook-timestamp", "webhook-signature"}
)

// Parse validates and compiles a rules file read from name. lookup reads
// environment variables (webhook secrets, Slack webhook URLs); nil reads none.
// Every problem is reported, each as an *Error joined with errors.Join.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Rules, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	p := &parser{file: name, lookup: lookup, budget: nodeBudget}
	root := p.document(data)
	if root == nil {
		return nil, p.err()
	}
	r := p.rules(root)
	if err := p.err(); err != nil {
		return nil, err
	}
	r.buildIndex()
	return r, nil
}

type parser struct {
	file   string
	lookup func(string) (string, bool)
	errs   []*Error
	budget int
	// sinksUnread is set when the sinks, or a sink's name, could not be
	// read; routes naming unknown sinks are then not reported, as they may
	// name one of them.
	sinksUnread bool
}

// charge counts one visited node against the budget. Once the budget is
// spent it records the problem once and returns false.
func (p *parser) charge(n *yaml.Node, field string) bool {
	p.budget--
	if p.budget == -1 {
		p.errorf(n.Line, field, "the file is too complex: more than %d YAML nodes with aliases expanded", nodeBudget)
	}
	return p.budget >= 0
}

func (p *parser) errorf(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// err returns every problem found, in line order.
func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// document decodes data into its one YAML document and returns the top-level
// node, or nil after recording why there is none.
func (p *parser) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(1, "", "the file is empty: want sinks and routes")
		} else {
			p.syntax(data, err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		p.syntax(data, err)
		return nil
	default:
		p.errorf(extra.Line, "", "a second YAML document: want one document")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorf(1, "", "the file is empty: want sinks and routes")
			return nil
		}
		root = resolve(root.Content[0])
	}
	if isNull(root) {
		p.errorf(1, "", "the file is empty: want sinks and routes")
		return nil
	}
	return root
}

// syntax records a YAML syntax error at the line where it is. yaml.v3 names
// no line for some errors (control characters, bad UTF-8, an unknown anchor)
// and, for parser errors, the line where the enclosing block starts rather
// than the line that breaks it; so the line is found as the shortest run of
// leading lines that fails to decode for a reason other than ending early.
func (p *parser) syntax(data []byte, err error) {
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
	p.errorf(line, "", "invalid YAML: %s", msg)
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

// resolve follows aliases. yaml.v3 has already refused unknown anchors and
// alias cycles; a dangling alias is taken as null.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

type pair struct {
	key  string
	line int
	val  *yaml.Node
}

// mapping returns the keys and values of a mapping node, reporting unknown
// and repeated keys. A null node is an empty mapping.
func (p *parser) mapping(n *yaml.Node, field string, known []string) ([]pair, bool) {
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, field, "want a mapping, got %s", describe(n))
		return nil, false
	}
	seen := map[string]int{}
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if !p.charge(k, field) {
			return nil, false
		}
		key := k.Value
		sub := join(field, key)
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, field, "want a plain key, got %s", describe(k))
			continue
		}
		if known != nil && !slices.Contains(known, key) {
			p.errorf(k.Line, sub, "unknown key %q (want one of %s)", key, strings.Join(known, ", "))
			continue
		}
		if first, dup := seen[key]; dup {
			p.errorf(k.Line, sub, "repeated key: already set at line %d", first)
			continue
		}
		seen[key] = k.Line
		v := resolve(n.Content[i+1])
		out = append(out, pair{key: key, line: k.Line, val: v})
	}
	return out, true
}

// sequence returns the items of a sequence node; a scalar stands for a
// sequence of one.
func (p *parser) sequence(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	switch n.Kind {
	case yaml.SequenceNode:
		items := make([]*yaml.Node, 0, len(n.Content))
		for _, c := range n.Content {
			c = resolve(c)
			if !p.charge(c, field) {
				return nil, false
			}
			items = append(items, c)
		}
		return items, true
	case yaml.ScalarNode:
		if isNull(n) {
			p.errorf(n.Line, field, "no value: want a list")
			return nil, false
		}
		return []*yaml.Node{n}, true
	}
	p.errorf(n.Line, field, "want a list, got %s", describe(n))
	return nil, false
}

// str returns a non-empty scalar as written.
func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.errorf(n.Line, field, "want a string, got %s", describe(n))
		return "", false
	}
	if isNull(n) || strings.TrimSpace(n.Value) == "" {
		p.errorf(n.Line, field, "no value: want a non-empty string")
		return "", false
	}
	return n.Value, true
}

func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n.Line, field, "want true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

func (p *parser) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		p.errorf(n.Line, field, "%q is not a positive duration: want a number with a unit, such as 30s, 10m or 48h", s)
		return 0, false
	}
	return d, true
}

// env reads the variable named by n; the value is a secret and never appears
// in an error.
func (p *parser) env(n *yaml.Node, field string) (name, value string, ok bool) {
	name, ok = p.str(n, field)
	if !ok {
		return "", "", false
	}
	if !envRE.MatchString(name) {
		p.errorf(n.Line, field, "%q is not an environment variable name", name)
		return "", "", false
	}
	value, set := p.lookup(name)
	switch {
	case !set:
		p.errorf(n.Line, field, "environment variable %s is not set", name)
		return "", "", false
	case strings.TrimSpace(value) == "":
		p.errorf(n.Line, field, "environment variable %s is set but empty", name)
		return "", "", false
	}
	return name, value, true
}

func (p *parser) rules(root *yaml.Node) *Rules {
	r := &Rules{File: p.file, sinkIndex: map[string]int{}}
	pairs, ok := p.mapping(root, "", topKeys)
	if !ok {
		return r
	}
	var sinksLine, routesLine int
	var sinksNode, routesNode *yaml.Node
	for _, kv := range pairs {
		switch kv.key {
		case "sinks":
			sinksLine, sinksNode = kv.line, kv.val
		case "routes":
			routesLine, routesNode = kv.line, kv.val
		}
	}
	if isNull(sinksNode) {
		p.errorf(cmp.Or(sinksLine, root.Line), "sinks", "no sinks: want a list of at least one sink")
		p.sinksUnread = true
	} else if items, ok := p.list(sinksNode, "sinks"); ok {
		for i, item := range items {
			p.sink(r, item, fmt.Sprintf("sinks[%d]", i))
		}
	} else {
		p.sinksUnread = true
	}
	if isNull(routesNode) {
		p.errorf(cmp.Or(routesLine, root.Line), "routes", "no routes: want a list of at least one route")
	} else if items, ok := p.list(routesNode, "routes"); ok {
		names := map[string]int{}
		for i, item := range items {
			r.Routes = append(r.Routes, p.route(r, item, fmt.Sprintf("routes[%d]", i), names))
		}
	}
	return r
}

// list returns the items of a top-level list, which must not be empty.
func (p *parser) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, field, "want a list, got %s", describe(n))
		return nil, false
	}
	items, ok := p.sequence(n, field)
	if ok && len(items) == 0 {
		p.errorf(n.Line, field, "empty list: want at least one entry")
		return nil, false
	}
	return items, ok
}

func (p *parser) sink(r *Rules, n *yaml.Node, field string) {
	pairs, ok := p.mapping(n, field, nil)
	if !ok {
		p.sinksUnread = true
		return
	}
	s := Sink{Line: n.Line, MaxAge: DefaultMaxAge, MaxRetryAfter: DefaultMaxRetryAfter}
	var nameOK, typeOK bool
	if kv, found := find(pairs, "name"); found {
		// A name that breaks the naming rule still defines the sink, so
		// that routes naming it are not also reported.
		s.Name, _ = p.name(kv.val, join(field, "name"))
		nameOK = s.Name != ""
	} else {
		p.errorf(n.Line, join(field, "name"), "missing: every sink needs a name")
	}
	if !nameOK {
		p.sinksUnread = true
	}
	if kv, found := find(pairs, "type"); found {
		s.Type, typeOK = p.str(kv.val, join(field, "type"))
		if typeOK && !slices.Contains(sinkTypes, s.Type) {
			p.errorf(kv.val.Line, join(field, "type"), "unknown sink type %q (want %s)", s.Type, strings.Join(sinkTypes, ", "))
			typeOK = false
		}
	} else {
		p.errorf(n.Line, join(field, "type"), "missing: want one of %s", strings.Join(sinkTypes, ", "))
	}
	if nameOK {
		if first, dup := r.sinkIndex[s.Name]; dup {
			p.errorf(lineOf(pairs, "name"), join(field, "name"), "sink %q is already defined at line %d", s.Name, r.Sinks[first].Line)
			nameOK = false
		}
	}
	for _, kv := range pairs {
		sub := join(field, kv.key)
		switch {
		case kv.key == "name" || kv.key == "type":
		case kv.key == "max_age":
			s.MaxAge, _ = p.duration(kv.val, sub)
		case kv.key == "max_retry_after":
			s.MaxRetryAfter, _ = p.duration(kv.val, sub)
		case !typeOK:
			// The options of an unknown type cannot be checked; only keys
			// that no sink type has are reported.
			if !knownSinkKey(kv.key) {
				p.errorf(kv.line, sub, "unknown key %q", kv.key)
			}
		case !slices.Contains(sinkTypeKeys[s.Type], kv.key):
			p.errorf(kv.line, sub, "unknown key %q for a %s sink (want %s)", kv.key, s.Type,
				strings.Join(append(slices.Clone(sinkCommonKeys), sinkTypeKeys[s.Type]...), ", "))
		default:
			p.option(&s, kv, sub)
		}
	}
	if typeOK {
		p.finishSink(&s, n, field, pairs)
	}
	if nameOK {
		// A sink with problems still defines its name, so that routes naming
		// it are not also reported as naming an undefined sink.
		r.sinkIndex[s.Name] = len(r.Sinks)
		r.Sinks = append(r.Sinks, s)
	}
}

func knownSinkKey(key string) bool {
	for _, keys := range sinkTypeKeys {
		if slices.Contains(keys, key) {
			return true
		}
	}
	return false
}

func find(pairs []pair, key string) (pair, bool) {
	for _, kv := range pairs {
		if kv.key == key {
			return kv, true
		}
	}
	return pair{}, false
}

// lineOf returns the line of key, which the caller knows is present.
func lineOf(pairs []pair, key string) int {
	v, _ := find(pairs, key)
	return v.line
}

// name reads the name of a sink or route: letters, digits, _ . -, up to 64.
func (p *parser) name(n *yaml.Node, field string) (string, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return "", false
	}
	if !nameRE.MatchString(s) {
		p.errorf(n.Line, field, "%q is not a valid name: want letters, digits, _, . or -, starting with a letter or digit, at most 64", s)
		return s, false
	}
	return s, true
}

// option applies one type-specific sink option.
func (p *parser) option(s *Sink, kv pair, field string) {
	v := kv.val
	switch kv.key {
	case "subject":
		s.SubjectText, _ = p.str(v, field)
	case "jetstream":
		s.JetStream, _ = p.boolean(v, field)
	case "create_stream":
		if name, ok := p.str(v, field); ok {
			if !streamRE.MatchString(name) {
				p.errorf(v.Line, field, "%q is not a stream name: want letters, digits, _ or -", name)
			}
			s.CreateStream = name
		}
	case "channel":
		s.Channel, _ = p.str(v, field)
	case "webhook_url":
		if u, ok := p.str(v, field); ok {
			p.httpURL(v, field, u)
			s.WebhookURL = u
		}
	case "webhook_url_env":
		if name, u, ok := p.env(v, field); ok {
			if !validHTTPURL(u) {
				p.errorf(v.Line, field, "environment variable %s does not hold an http:// or https:// URL with a host", name)
			}
			s.WebhookURLEnv, s.WebhookURL = name, u
		}
	case "url":
		if u, ok := p.str(v, field); ok {
			p.httpURL(v, field, u)
			s.URL = u
		}
	case "headers":
		s.Headers = p.headers(v, field)
	case "secret_env":
		if name, secret, ok := p.env(v, field); ok {
			p.checkSecret(v, field, name, secret)
			s.SecretEnv, s.Secret = name, secret
		}
	case "timeout":
		s.Timeout, _ = p.duration(v, field)
	}
}

// finishSink applies defaults and checks what a sink of its type needs.
func (p *parser) finishSink(s *Sink, n *yaml.Node, field string, pairs []pair) {
	has := func(key string) bool { _, ok := find(pairs, key); return ok }
	switch s.Type {
	case TypeNATS:
		line := n.Line
		if has("subject") {
			if s.SubjectText == "" {
				return // already reported
			}
			line = lineOf(pairs, "subject")
		} else {
			s.SubjectText = DefaultSubject
		}
		tmpl, plain, err := compileSubject(s.SubjectText)
		if err != nil {
			p.errorf(line, join(field, "subject"), "bad template: %v", err)
		}
		s.subject, s.plainSubject = tmpl, plain
		if s.CreateStream != "" {
			first, _, _ := strings.Cut(s.SubjectText, ".")
			switch {
			case !s.JetStream:
				p.errorf(lineOf(pairs, "create_stream"), join(field, "create_stream"), "needs jetstream: true")
			case first == "" || strings.Contains(first, "{{"):
				p.errorf(lineOf(pairs, "create_stream"), join(field, "create_stream"),
					"needs a subject that starts with a literal token, such as energy., so that the stream captures only these subjects")
			}
		}
	case TypeSlack:
		hasChannel, hasURL, hasEnv := has("channel"), has("webhook_url"), has("webhook_url_env")
		switch {
		case !hasChannel && !hasURL && !hasEnv:
			p.errorf(n.Line, join(field, "channel"), "missing: a slack sink needs channel (bot token) or webhook_url / webhook_url_env (incoming webhook)")
		case hasURL && hasEnv:
			p.errorf(lineOf(pairs, "webhook_url_env"), join(field, "webhook_url_env"), "set webhook_url or webhook_url_env, not both")
		case hasChannel && (hasURL || hasEnv):
			p.errorf(lineOf(pairs, "channel"), join(field, "channel"), "set channel or an incoming webhook, not both: an incoming webhook posts to its own channel")
		}
	case TypeWebhook:
		if !has("url") {
			p.errorf(n.Line, join(field, "url"), "missing: a webhook sink needs url")
		}
		if s.Timeout == 0 {
			s.Timeout = DefaultWebhookTimeout
		}
	}
}

// httpURL checks an http(s) URL without echoing it: it may carry a token.
func (p *parser) httpURL(n *yaml.Node, field, u string) {
	if !validHTTPURL(u) {
		p.errorf(n.Line, field, "want an http:// or https:// URL with a host")
	}
}

func validHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// checkSecret checks that a whsec_ secret decodes, as Standard Webhooks
// libraries decode it, without echoing it.
func (p *parser) checkSecret(n *yaml.Node, field, env, secret string) {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return
	}
	if key, err := base64.StdEncoding.DecodeString(rest); err != nil || len(key) == 0 {
		p.errorf(n.Line, field, "environment variable %s starts with whsec_ but the rest is not a base64 key", env)
	}
}

func (p *parser) headers(n *yaml.Node, field string) map[string]string {
	pairs, ok := p.mapping(n, field, nil)
	if !ok {
		return nil
	}
	if len(pairs) == 0 {
		p.errorf(n.Line, field, "no headers: leave the key out or name at least one")
		return nil
	}
	out := make(map[string]string, len(pairs))
	lower := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		sub := join(field, kv.key)
		switch {
		case !validHeaderName(kv.key):
			p.errorf(kv.line, sub, "%q is not a valid header name", kv.key)
		case slices.Contains(reservedHeads, strings.ToLower(kv.key)):
			p.errorf(kv.line, sub, "header %s is set by relay and cannot be overridden", kv.key)
		case lower[strings.ToLower(kv.key)] != "":
			p.errorf(kv.line, sub, "header %s is already set as %s: header names ignore case", kv.key, lower[strings.ToLower(kv.key)])
		case kv.val.Kind != yaml.ScalarNode || isNull(kv.val):
			p.errorf(kv.val.Line, sub, "want a string value, got %s", describe(kv.val))
		case strings.ContainsAny(kv.val.Value, "\r\n\x00"):
			p.errorf(kv.val.Line, sub, "the value contains a line break or NUL")
		default:
			out[kv.key] = kv.val.Value
			lower[strings.ToLower(kv.key)] = kv.key
		}
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (p *parser) route(r *Rules, n *yaml.Node, field string, names map[string]int) Route {
	rt := Route{Line: n.Line}
	pairs, ok := p.mapping(n, field, routeKeys)
	if !ok {
		return rt
	}
	for _, kv := range pairs {
		sub := join(field, kv.key)
		switch kv.key {
		case "name":
			if name, ok := p.name(kv.val, sub); ok {
				if first, dup := names[name]; dup {
					p.errorf(kv.val.Line, sub, "route %q is already defined at line %d", name, first)
				} else {
					names[name] = n.Line
				}
				rt.Name = name
			}
		case "match":
			rt.Match, rt.cond = p.match(kv.val, sub)
		case "to":
			rt.To = p.to(r, kv.val, sub)
		case "continue":
			rt.Continue, _ = p.boolean(kv.val, sub)
		}
	}
	if _, ok := find(pairs, "name"); !ok {
		p.errorf(n.Line, join(field, "name"), "missing: every route needs a name")
	}
	if _, ok := find(pairs, "to"); !ok {
		p.errorf(n.Line, join(field, "to"), "missing: the route names no sink")
	}
	return rt
}

func (p *parser) to(r *Rules, n *yaml.Node, field string) []string {
	items, ok := p.sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.errorf(n.Line, field, "empty list: the route names no sink")
		return nil
	}
	var out []string
	for _, it := range items {
		name, ok := p.str(it, field)
		if !ok {
			continue
		}
		if _, defined := r.sinkIndex[name]; !defined {
			if !p.sinksUnread {
				p.errorf(it.Line, field, "sink %q is not defined", name)
			}
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func (p *parser) match(n *yaml.Node, field string) (Match, cond) {
	var m Match
	var c cond
	pairs, _ := p.mapping(n, field, matchKeys)
	for _, kv := range pairs {
		sub := join(field, kv.key)
		items, ok := p.sequence(kv.val, sub)
		if !ok {
			continue
		}
		if len(items) == 0 {
			p.errorf(kv.val.Line, sub, "empty list matches nothing: leave the key out to match any")
			continue
		}
		switch kv.key {
		case "transitions":
			for _, it := range items {
				s, ok := p.str(it, sub)
				if !ok {
					continue
				}
				t := event.Transition(s)
				if !t.Valid() {
					p.errorf(it.Line, sub, "%q is not a transition (want start, end or invalid)", s)
					continue
				}
				m.Transitions = append(m.Transitions, t)
				c.transitions |= 1 << transitionSlot(t)
			}
		case "levels":
			for _, it := range items {
				if l, ok := p.level(it, sub); ok {
					m.Levels = append(m.Levels, l)
					c.levels |= 1 << l
				}
			}
		case "station_names", "device_names":
			f := fStationName
			if kv.key == "device_names" {
				f = fDeviceName
			}
			var written []string
			for _, it := range items {
				s, ok := p.str(it, sub)
				if !ok {
					continue
				}
				g, literal, err := compileGlob(s)
				if err != nil {
					p.errorf(it.Line, sub, "bad glob %q: %v", s, err)
					continue
				}
				written = append(written, s)
				if literal {
					c.values[f] = append(c.values[f], g.lit())
				} else {
					c.globs[f] = append(c.globs[f], g)
					c.hasGlobs = true
				}
			}
			if f == fStationName {
				m.StationNames = written
			} else {
				m.DeviceNames = written
			}
		default:
			var vals []string
			for _, it := range items {
				s, ok := p.str(it, sub)
				if !ok {
					continue
				}
				if kv.key == "device_types" {
					code, known := event.DeviceType(s)
					if !known {
						p.errorf(it.Line, sub, "%q is not a device type of the upstream (any letter case of: %s)",
							s, strings.Join(event.DeviceTypes, ", "))
						continue
					}
					s = code
				}
				vals = append(vals, s)
			}
			f, target := stringField(&m, kv.key)
			*target = vals
			c.values[f] = vals
		}
	}
	return m, c
}

// stringField returns the field index and the Match list of a key that
// lists plain values.
func stringField(m *Match, key string) (int, *[]string) {
	switch key {
	case "tenant_ids":
		return fTenant, &m.TenantIDs
	case "station_ids":
		return fStation, &m.StationIDs
	case "system_ids":
		return fSystem, &m.SystemIDs
	case "device_sns":
		return fDevice, &m.DeviceSNs
	case "device_types":
		return fDeviceType, &m.DeviceTypes
	case "event_codes":
		return fEventCode, &m.EventCodes
	}
	return fEventType, &m.EventTypes
}

// level reads a level: 0 to 3, or its name (urgent, severe, major, minor).
func (p *parser) level(n *yaml.Node, field string) (int, bool) {
	s, ok := p.str(n, field)
	if !ok {
		return 0, false
	}
	for l := 0; l <= maxLevel; l++ {
		if s == strconv.Itoa(l) || s == event.LevelName(l) {
			return l, true
		}
	}
	p.errorf(n.Line, field, "%q is not a level (want 0-3, or urgent, severe, major, minor)", s)
	return 0, false
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// describe names the kind of a node for an error, without its value.
func describe(n *yaml.Node) string {
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
