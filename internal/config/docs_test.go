package config

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/repotest"
)

// repoRoot is the repository's root, relative to this package.
const repoRoot = "../.."

// self is this file, relative to the repository's root: its test cases are
// broken references on purpose.
const self = "internal/config/docs_test.go"

// designPath is the design document, relative to the repository's root; every
// reference to the design names it so.
const designPath = "docs/design.md"

var (
	// anyDesign finds every mention of a design document, whatever its
	// folder or letter case, with the path written before it.
	anyDesign = regexp.MustCompile(`(?i)[\w./~-]*design\.md`)
	// sectionRef reads one section of a reference: "§4", ", §5", " to §11",
	// with its targets in brackets: "§12 (P6)", "§12 (P1 to P8)".
	sectionRef = regexp.MustCompile(`^\x60?\s*(?:,\s*|and\s+|to\s+|or\s+)?§(\d+)(?:\s*\(([^)]*)\))?`)
	// heading is a numbered section of the design: "## 4. Poller".
	heading = regexp.MustCompile(`(?m)^## (\d+)\. `)
	// targetRow is a row of the targets table of §12: "| P6 | ...".
	targetRow = regexp.MustCompile(`(?m)^\| (P\d+) \|`)
	target    = regexp.MustCompile(`P\d+`)
)

// design is what references may point at in the design document.
type design struct {
	sections map[int]bool
	targets  map[string]bool // the P ids of §12
}

// parseDesign reads the numbered sections of the design and the targets of
// its section 12.
func parseDesign(text string) design {
	d := design{sections: map[int]bool{}, targets: map[string]bool{}}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		d.sections[n] = true
	}
	if s12, ok := section(text, 12); ok {
		for _, m := range targetRow.FindAllStringSubmatch(s12, -1) {
			d.targets[m[1]] = true
		}
	}
	return d
}

// section returns the text of section n of the design, heading included.
func section(text string, n int) (string, bool) {
	locs := heading.FindAllStringSubmatchIndex(text, -1)
	for i, l := range locs {
		if text[l[2]:l[3]] != strconv.Itoa(n) {
			continue
		}
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		return text[l[0]:end], true
	}
	return "", false
}

// checkReferences returns one problem per reference of text (the file name)
// that points outside the repository or at a part of the design that does
// not exist.
func checkReferences(name, text string, d design) []error {
	var errs []error
	for _, loc := range anyDesign.FindAllStringIndex(text, -1) {
		line := 1 + strings.Count(text[:loc[0]], "\n")
		where := fmt.Sprintf("%s:%d", name, line)
		if ref := text[loc[0]:loc[1]]; ref != designPath {
			errs = append(errs, fmt.Errorf("%s: %q: the design is %s, in the repository", where, ref, designPath))
			continue
		}
		rest := text[loc[1]:]
		for {
			m := sectionRef.FindStringSubmatchIndex(rest)
			if m == nil {
				break
			}
			n, _ := strconv.Atoi(rest[m[2]:m[3]])
			if !d.sections[n] {
				errs = append(errs, fmt.Errorf("%s: %s §%d: the design has no section %d", where, designPath, n, n))
			}
			if m[4] >= 0 {
				for _, id := range target.FindAllString(rest[m[4]:m[5]], -1) {
					if n != 12 || !d.targets[id] {
						errs = append(errs, fmt.Errorf("%s: %s §%d (%s): the design's §12 has no target %s", where, designPath, n, id, id))
					}
				}
			}
			rest = rest[m[1]:]
		}
	}
	return errs
}

// TestDesignReferences checks every reference to the design in the
// repository's Go, Markdown and YAML files: each names docs/design.md (no
// copy outside the repository), and each section or target it names exists.
func TestDesignReferences(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot, designPath))
	if err != nil {
		t.Fatal(err)
	}
	d := parseDesign(string(text))
	if len(d.sections) < 13 || len(d.targets) < 8 {
		t.Fatalf("%s: found sections %v and targets %v; want §1 to §13 and P1 to P8", designPath, d.sections, d.targets)
	}
	paths, err := repotest.Files(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, rel := range paths {
		switch path.Ext(rel) {
		case ".go", ".md", ".yaml", ".yml":
		default:
			continue
		}
		if rel == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, err := range checkReferences(rel, string(b), d) {
			t.Error(err)
		}
	}
	if files < 50 {
		t.Fatalf("read %d files under %s; is it the repository's root?", files, repoRoot)
	}
}

// TestDesignReferencesCatch proves that checkReferences refuses each kind of
// broken reference and accepts the forms the repository uses.
func TestDesignReferencesCatch(t *testing.T) {
	d := parseDesign("# relay\n## 4. Poller\n## 9. Configuration\n## 11. Operations\n" +
		"## 12. Targets\n| id | what |\n|---|---|\n| P6 | memory |\n| P7 | baselines |\n")
	tests := []struct {
		name, text, want string
	}{
		{"a section", "// (docs/design.md §4).", ""},
		{"a range", "// (docs/design.md §9 to §11).", ""},
		{"a target", "# docs/design.md §12 (P6) targets", ""},
		{"targets", "// docs/design.md §12 (P6, P7)", ""},
		{"in backticks", "`docs/design.md` §4 is", ""},
		{"the whole design", "see docs/design.md.", ""},
		{"the old name", "// (DESIGN.md section 4)", `"DESIGN.md": the design is docs/design.md`},
		{"a path outside", "see ../elsewhere/DESIGN.md §4", `"../elsewhere/DESIGN.md"`},
		{"an absolute path", "see /srv/notes/design.md", `"/srv/notes/design.md"`},
		{"a relative path", "see ../../docs/design.md §4", `"../../docs/design.md"`},
		{"a missing section", "// (docs/design.md §14).", "no section 14"},
		{"a missing end of a range", "// (docs/design.md §9 to §10).", "no section 10"},
		{"a missing target", "docs/design.md §12 (P9)", "no target P9"},
		{"a target outside §12", "docs/design.md §4 (P6)", "no target P6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkReferences("f.go", tt.text, d)
			if tt.want == "" {
				if len(errs) != 0 {
					t.Fatalf("got %v, want no problem", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
				t.Fatalf("got %v, want one problem containing %q", errs, tt.want)
			}
		})
	}
}

// designSection returns section n of the design, heading included.
func designSection(t *testing.T, n int) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repoRoot, designPath))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := section(string(text), n)
	if !ok {
		t.Fatalf("%s has no section %d", designPath, n)
	}
	return s
}

// TestDesignListsEveryVariable checks that docs/design.md §9 names the
// variables of Variables, in the same order, and no others.
func TestDesignListsEveryVariable(t *testing.T) {
	s9 := designSection(t, 9)
	var got []string
	for _, v := range regexp.MustCompile(`RELAY_[A-Z_]+`).FindAllString(s9, -1) {
		if !slices.Contains(got, v) {
			got = append(got, v)
		}
	}
	if !slices.Equal(got, Variables) {
		t.Fatalf("%s §9 lists\n%v\nwant Variables:\n%v", designPath, got, Variables)
	}
}

// layoutPath matches the path that starts an entry of the design's layout
// (§2): "internal/notify/", "cmd/relay/", "internal/notify/<type>/".
var layoutPath = regexp.MustCompile(`^((?:cmd|internal)/[\w/<>]*?)/?(?:\s|$)`)

// TestDesignLayoutListsEveryPackage checks that docs/design.md §2 names
// every folder of Go code under cmd/ and internal/ and no folder that does
// not exist, so that a newcomer's map of the house matches the house. The
// entry internal/notify/<type>/ stands for the sink type packages: the
// folders under internal/notify whose code declares the package's sink type
// (var Type, which the registry lists).
func TestDesignLayoutListsEveryPackage(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot, designPath))
	if err != nil {
		t.Fatal(err)
	}
	s2, ok := section(string(text), 2)
	if !ok {
		t.Fatalf("%s has no §2", designPath)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(s2, "\n") {
		if m := layoutPath.FindStringSubmatch(line); m != nil {
			listed[m[1]] = true
		}
	}
	files, err := repotest.Files(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range files {
		dir := path.Dir(f)
		if path.Ext(f) != ".go" || !(strings.HasPrefix(f, "cmd/") || strings.HasPrefix(f, "internal/")) ||
			strings.Contains("/"+dir+"/", "/testdata/") {
			continue
		}
		found[dir] = true
	}
	for dir := range found {
		if listed[dir] {
			continue
		}
		if listed["internal/notify/<type>"] && path.Dir(dir) == "internal/notify" && declaresSinkType(t, dir) {
			continue
		}
		t.Errorf("%s §2 does not list %s/", designPath, dir)
	}
	for dir := range listed {
		if !found[dir] && dir != "internal/notify/<type>" {
			t.Errorf("%s §2 lists %s/, which holds no Go code", designPath, dir)
		}
	}
	if len(found) < 20 {
		t.Fatalf("found %d folders of Go code under %s; is it the repository's root?", len(found), repoRoot)
	}
}

// declaresSinkType reports whether the code of dir, relative to the
// repository's root, declares a sink type (var Type).
func declaresSinkType(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(b), "var Type ") || strings.Contains(string(b), "\nvar Type ") {
			return true
		}
	}
	return false
}
