package main

import (
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
)

// repoRoot is the repository's root, relative to this package.
const repoRoot = "../.."

// readmeMaxLines is the most lines README.md may have: it is the front door,
// and the manual lives in docs/.
const readmeMaxLines = 300

// externalLinks are the only addresses outside the repository the docs link
// to: the specifications relay implements.
var externalLinks = []string{
	"https://www.standardwebhooks.com",
	"https://cloudevents.io",
}

var (
	// mdLink is an inline Markdown link: its target, without a title.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// codeSpan is inline code, whose brackets are no links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// mdHeading is an ATX heading.
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// docPages returns README.md and every page of docs/, relative to the
// repository's root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 5 {
		t.Fatalf("found %v; is %s the repository's root?", out, repoRoot)
	}
	return out
}

// proseLines calls f with each line of markdown outside fenced code blocks,
// with its number.
func proseLines(markdown string, f func(n int, line string)) {
	fenced := false
	for i, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			f(i+1, line)
		}
	}
}

// anchor is the fragment GitHub gives a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces turned into '-'.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments of every heading of markdown; a repeated
// heading gets "-1", "-2", ... as on GitHub.
func anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	proseLines(markdown, func(_ int, line string) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := anchor(strings.NewReplacer("`", "", "*", "").Replace(m[1]))
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	})
	return out
}

// TestAnchorFollowsGitHub pins the anchor rule on the headings the docs link
// to.
func TestAnchorFollowsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"Rules: who gets what":                    "rules-who-gets-what",
		"The ISA-18.2 report":                     "the-isa-182-report",
		"Dead letters: list, show, replay, drop":  "dead-letters-list-show-replay-drop",
		"What relay tolerates from the upstream":  "what-relay-tolerates-from-the-upstream",
		"Webhooks and verifying their signatures": "webhooks-and-verifying-their-signatures",
		"9. Configuration (environment, via x_y)": "9-configuration-environment-via-x_y",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	got := anchors("# A\n```\n# not a heading\n```\n## A\n### B `c`\n")
	for _, want := range []string{"a", "a-1", "b-c"} {
		if !got[want] {
			t.Errorf("anchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("anchors: a comment in a code block was taken for a heading")
	}
}

// TestDocLinksResolve: every relative link of README.md and docs/*.md names
// a file of the repository and, with a #fragment, a heading of that file; the
// only links out of the repository are externalLinks.
func TestDocLinksResolve(t *testing.T) {
	texts := map[string]string{}
	read := func(rel string) (string, error) {
		if s, ok := texts[rel]; ok {
			return s, nil
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		texts[rel] = string(b)
		return string(b), err
	}
	links := 0
	for _, page := range docPages(t) {
		text, err := read(page)
		if err != nil {
			t.Fatal(err)
		}
		proseLines(text, func(n int, line string) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				links++
				target := m[1]
				where := page + ":" + strconv.Itoa(n)
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					if !slices.Contains(externalLinks, strings.TrimSuffix(target, "/")) {
						t.Errorf("%s: %s points outside the repository", where, target)
					}
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				rel := page
				if file != "" {
					rel = path.Join(path.Dir(page), file)
				}
				if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(file) {
					t.Errorf("%s: %s points outside the repository", where, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s: %s: %s does not exist", where, target, rel)
					continue
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: %s: a fragment of %s, which has no headings", where, target, rel)
					continue
				}
				linked, err := read(rel)
				if err != nil {
					t.Errorf("%s: %s: %v", where, target, err)
					continue
				}
				if !anchors(linked)[frag] {
					t.Errorf("%s: %s: %s has no heading #%s", where, target, rel, frag)
				}
			}
		})
	}
	if links < 30 {
		t.Fatalf("found %d links in the docs; are they read?", links)
	}
}

// TestReadmeIsAFrontDoor: README.md stays short, and its first code block is
// the two commands a newcomer runs first.
func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move the rest to a page of docs/", n, readmeMaxLines)
	}
	_, block, ok := strings.Cut(readme, "```")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no code block")
	}
	var commands []string
	for _, line := range strings.Split(block, "\n")[1:] {
		if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "" {
			commands = append(commands, strings.TrimSpace(cmd))
		}
	}
	for _, want := range []string{"go run ./cmd/relay demo", "go test -race ./..."} {
		if !slices.Contains(commands, want) {
			t.Errorf("README.md's first code block %q has no %q", commands, want)
		}
	}
}

// TestReadmeMinimalConfigurationChecks runs the relay check of README.md's
// minimal configuration as written: the variables its export lines set, the
// rules of its yaml block in rules.yaml, in a fresh folder.
func TestReadmeMinimalConfigurationChecks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## A minimal configuration\n")
	if !ok {
		t.Fatal(`README.md has no "## A minimal configuration" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	block := func(lang string) string {
		_, s, ok := strings.Cut(section, "```"+lang+"\n")
		if !ok {
			t.Fatalf("the minimal configuration has no %s block", lang)
		}
		s, _, _ = strings.Cut(s, "```")
		return s
	}
	env := map[string]string{}
	var check []string
	for line := range strings.Lines(block("sh")) {
		args, err := shellWords(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		switch {
		case len(args) > 1 && args[0] == "export":
			for _, kv := range args[1:] {
				k, v, _ := strings.Cut(kv, "=")
				if strings.HasPrefix(k, "RELAY_") && !slices.Contains(config.Variables, k) {
					t.Errorf("%s: relay reads no variable %s", strings.TrimSpace(line), k)
				}
				env[k] = v
			}
		case len(args) > 1 && args[0] == "relay" && args[1] == "check":
			check = args[2:]
		}
	}
	if check == nil || env["RELAY_RULES"] == "" {
		t.Fatalf("the minimal configuration sets no RELAY_RULES (%v) or runs no relay check", env)
	}
	t.Chdir(t.TempDir())
	if err := os.WriteFile(env["RELAY_RULES"], []byte(block("yaml")), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, env)
	if code, out, errs := runCmd(t, cmdCheck, check...); code != 0 {
		t.Fatalf("relay check: exit %d\n%s%s", code, out, errs)
	}
}

// TestReadmeConsoleTokensAreAccepted runs the export lines of README.md's
// "Console" section in bash, as written, and loads the configuration with
// the tokens they make: relay accepts them (16 characters or more, the view
// token not the admin token). A line whose program is not installed is
// said and left out.
func TestReadmeConsoleTokensAreAccepted(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Console\n")
	if !ok {
		t.Fatal(`README.md has no "## Console" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the Console section has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	env := map[string]string{}
	for line := range strings.Lines(block) {
		m := regexp.MustCompile(`^export (RELAY_[A-Z_]+)=\$\((\w+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%q: want export RELAY_...=$(a command making a token)", strings.TrimSpace(line))
		}
		if _, err := exec.LookPath(m[2]); err != nil {
			t.Logf("%s is not installed: %q is left out", m[2], strings.TrimSpace(line))
			continue
		}
		out, err := exec.Command("bash", "-c", line+`printf %s "$`+m[1]+`"`).Output()
		if err != nil {
			t.Fatalf("%q: %v", strings.TrimSpace(line), err)
		}
		env[m[1]] = string(out)
	}
	if len(env) == 0 {
		t.Fatal("no token made")
	}
	if _, err := config.Load(t.Context(), envconfig.MapLookuper(env)); err != nil {
		t.Fatalf("the README's tokens %v: %v", slices.Collect(maps.Keys(env)), err)
	}
}
