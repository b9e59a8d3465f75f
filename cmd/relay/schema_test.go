package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/repotest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/rulefile"
)

// rulesSchema compiles what relay schema prints.
func rulesSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	code, out, errs := runCmd(t, cmdSchema)
	if code != 0 {
		t.Fatalf("relay schema: exit %d: %s", code, errs)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("relay schema prints no JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(route.SchemaPath, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(route.SchemaPath)
	if err != nil {
		t.Fatalf("relay schema prints no valid JSON Schema: %v", err)
	}
	return sch
}

// validate checks a rules file written in YAML against sch.
func validate(sch *jsonschema.Schema, rules []byte) error {
	var v any
	if err := yaml.Unmarshal(rules, &v); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// rulesText is a rules file found in the repository, and where.
type rulesText struct {
	where string
	text  []byte
}

// TestRulesTheParserAcceptsMatchTheSchema: every rules file of the
// repository that relay's parser accepts (every variable set) also
// validates against the schema relay schema prints: rules.example.yaml and
// the rules of the Kubernetes ConfigMaps, which must be accepted, and the
// YAML blocks of the Markdown files and the string constants of the Go
// files (tests, the demo, the bench) that hold rules, those of them the
// parser accepts.
func TestRulesTheParserAcceptsMatchTheSchema(t *testing.T) {
	sch := rulesSchema(t)
	every := func(string) (string, bool) { return rulefile.Placeholder, true }
	must, found := rulesFiles(t)
	for _, rf := range must {
		if _, err := route.Parse(rf.where, rf.text, every); err != nil {
			t.Errorf("%s: the parser refuses it: %v", rf.where, err)
		} else if err := validate(sch, rf.text); err != nil {
			t.Errorf("%s: the parser accepts it, the schema does not:\n%v", rf.where, err)
		}
	}
	accepted := 0
	for _, rf := range found {
		if _, err := route.Parse(rf.where, rf.text, every); err != nil {
			continue
		}
		accepted++
		if err := validate(sch, rf.text); err != nil {
			t.Errorf("%s: the parser accepts it, the schema does not:\n%v", rf.where, err)
		}
	}
	t.Logf("%d rules files; %d texts of Markdown and Go files, of which the parser accepts %d", len(must), len(found), accepted)
	if len(must) < 3 || accepted < 50 {
		t.Fatalf("found %d rules files and %d accepted texts: is %s the repository's root?", len(must), accepted, repoRoot)
	}
}

var (
	yamlBlock = regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")
	rulesKey  = regexp.MustCompile(`(?m)^\s*(sinks|routes):`)
)

// rulesFiles returns the rules files of the repository (YAML files with a
// sinks or routes key, and such entries of the manifests' ConfigMaps), which
// must be valid, and the texts of its Markdown and Go files that look like
// rules, which may not be.
func rulesFiles(t *testing.T) (must, found []rulesText) {
	t.Helper()
	paths, err := repotest.Files(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	goDirs := map[string]map[string][]byte{} // the Go files of each directory
	for _, rel := range paths {
		ext := path.Ext(rel)
		if ext != ".yaml" && ext != ".yml" && ext != ".md" && ext != ".go" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ext == ".md":
			for _, m := range yamlBlock.FindAllSubmatchIndex(b, -1) {
				if text := b[m[2]:m[3]]; rulesKey.Match(text) {
					found = append(found, rulesText{fmt.Sprintf("%s:%d", rel, 2+bytes.Count(b[:m[0]], []byte("\n"))), text})
				}
			}
		case ext == ".go":
			dir := path.Dir(rel)
			if goDirs[dir] == nil {
				goDirs[dir] = map[string][]byte{}
			}
			goDirs[dir][rel] = b
		case strings.HasPrefix(rel, "deploy/"):
			must = append(must, configMapRules(t, rel, b)...)
		case rulesKey.Match(b):
			must = append(must, rulesText{rel, b})
		}
	}
	for _, files := range goDirs {
		found = append(found, goStrings(t, files)...)
	}
	return must, found
}

// configMapRules returns the rules files a ConfigMap of the manifests
// holds: its data entries with sinks or routes.
func configMapRules(t *testing.T, rel string, b []byte) []rulesText {
	t.Helper()
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Kind != "ConfigMap" {
		return nil
	}
	var out []rulesText
	for name, text := range cm.Data {
		if rulesKey.MatchString(text) {
			out = append(out, rulesText{rel + ": " + name, []byte(text)})
		}
	}
	return out
}

// goPackage is the Go files of one directory, parsed, and the string
// constants and variables declared at their top level.
type goPackage struct {
	fset  *token.FileSet
	files map[string]*ast.File // by the path relative to the root
	decls map[string]ast.Expr
}

// goStrings returns the strings of the Go files of a directory that look
// like rules. A string built with + or a format keeps its constant parts,
// the package's string constants and variables it names, and, for any
// other operand and for a verb, a value of the kind a rules file holds
// there (a URL after url:, a name elsewhere, 1 for %d), so that it is a
// rules file when its parts fit.
func goStrings(t *testing.T, files map[string][]byte) []rulesText {
	t.Helper()
	pkg := goPackage{fset: token.NewFileSet(), files: map[string]*ast.File{}, decls: map[string]ast.Expr{}}
	for rel, b := range files {
		f, err := parser.ParseFile(pkg.fset, rel, b, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		pkg.files[rel] = f
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok {
				for _, spec := range g.Specs {
					if v, ok := spec.(*ast.ValueSpec); ok && len(v.Names) == len(v.Values) {
						for i, name := range v.Names {
							pkg.decls[name.Name] = v.Values[i]
						}
					}
				}
			}
		}
	}
	var out []rulesText
	for rel, f := range pkg.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.ADD {
					return true
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
			default:
				return true
			}
			s := pkg.text(n.(ast.Expr), "", 0)
			if rulesKey.MatchString(s) {
				out = append(out, rulesText{fmt.Sprintf("%s:%d", rel, pkg.fset.Position(n.Pos()).Line), []byte(s)})
			}
			return false
		})
	}
	return out
}

// text is the text of e, a string expression written after before.
func (p goPackage) text(e ast.Expr, before string, depth int) string {
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x := p.text(e.X, before, depth)
			return x + p.text(e.Y, before+x, depth)
		}
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil {
			var b strings.Builder
			for {
				loc := formatVerb.FindStringIndex(s)
				if loc == nil {
					return b.String() + s
				}
				b.WriteString(s[:loc[0]])
				b.WriteString(standIn(before+b.String(), s[loc[1]-1]))
				s = s[loc[1]:]
			}
		}
	case *ast.ParenExpr:
		return p.text(e.X, before, depth)
	case *ast.Ident:
		if d, ok := p.decls[e.Name]; ok && depth < 10 {
			return p.text(d, before, depth+1)
		}
	}
	return standIn(before, 's')
}

var (
	// formatVerb finds the verbs of a format string.
	formatVerb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)
	// urlKey ends a text whose next value is a URL.
	urlKey = regexp.MustCompile(`url: *$`)
)

// standIn is a value of the kind a rules file holds after before, for an
// operand or a format verb.
func standIn(before string, verb byte) string {
	url := urlKey.MatchString(before)
	switch {
	case verb == '%':
		return "%"
	case url && verb == 'q':
		return `"http://127.0.0.1:9/hook"`
	case url:
		return "http://127.0.0.1:9/hook"
	case verb == 'q':
		return `"X"`
	case verb == 'd' || verb == 'v':
		return "1"
	}
	return "X"
}

// misspeltRules is a valid rules file with a key of each kind of mapping.
const misspeltRules = `sinks:
  - name: ops-dingtalk
    type: dingtalk
    url_env: DINGTALK_URL
    secret_env: DINGTALK_SECRET
    digest: { threshold: 20, window: 5m }
routes:
  - name: urgent
    match: { levels: [urgent] }
    to: [ops-dingtalk]
    mute_when: [nights]
time_intervals:
  - name: nights
    time_intervals:
      - weekdays: ['monday:friday']
        times: [{ start_time: '22:00', end_time: '24:00' }]
inhibit:
  - name: offline-masks-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_types: [communication] }
`

// TestAMisspeltKeyIsRefusedByTheSchemaAndByCheck: a key misspelt anywhere
// in the file (at the top, in a route, a match, a sink's options, a digest,
// a time interval, an inhibit rule) is refused both by the schema editors
// read and by relay check.
func TestAMisspeltKeyIsRefusedByTheSchemaAndByCheck(t *testing.T) {
	sch := rulesSchema(t)
	cleanEnv(t, map[string]string{"DINGTALK_URL": rulefile.Placeholder, "DINGTALK_SECRET": rulefile.Placeholder})
	check := func(t *testing.T, text string) (int, string) {
		path := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runCmd(t, cmdCheck, "--rules-only", "--rules", path)
		return code, errs
	}
	if err := validate(sch, []byte(misspeltRules)); err != nil {
		t.Fatalf("the schema refuses the rules before any misspelling: %v", err)
	}
	if code, errs := check(t, misspeltRules); code != 0 {
		t.Fatalf("relay check refuses the rules before any misspelling: exit %d\n%s", code, errs)
	}
	for _, tc := range []struct{ name, key, misspelt string }{
		{"at the top", "routes:", "rotues:"},
		{"in a route", "match:", "matchh:"},
		{"in a match", "levels:", "levles:"},
		{"in a sink's options", "secret_env:", "secert_env:"},
		{"in a digest", "threshold:", "treshold:"},
		{"in a time interval", "weekdays:", "weekday:"},
		{"in a time range", "start_time:", "strat_time:"},
		{"in an inhibit rule", "source:", "sorce:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(misspeltRules, tc.key, tc.misspelt, 1)
			key := strings.TrimSuffix(tc.misspelt, ":")
			err := validate(sch, []byte(text))
			if err == nil {
				t.Errorf("the schema accepts %s", key)
			} else if !strings.Contains(err.Error(), "'"+key+"'") {
				t.Errorf("the schema refuses the file but does not name %s:\n%v", key, err)
			}
			code, errs := check(t, text)
			if code != 1 || !strings.Contains(errs, fmt.Sprintf("unknown key %q", key)) {
				t.Errorf("relay check --rules-only: exit %d, want 1 and unknown key %q:\n%s", code, key, errs)
			}
		})
	}
}

// TestSchemaCommandPrintsTheSchemaTheExampleNames: relay schema prints the
// schema whose committed copy rules.example.yaml names for editors on its
// first line.
func TestSchemaCommandPrintsTheSchemaTheExampleNames(t *testing.T) {
	if _, out, _ := runCmd(t, cmdSchema); out != string(route.Schema()) {
		t.Fatal("relay schema does not print route.Schema")
	}
	example, err := os.ReadFile(filepath.Join(repoRoot, "rules.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(example), "\n")
	if want := "# yaml-language-server: $schema=" + route.SchemaPath; first != want {
		t.Fatalf("rules.example.yaml starts with %q, want %q", first, want)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, route.SchemaPath)); err != nil {
		t.Fatal(err)
	}
}
