package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryCommandIsListed: every command relay dispatches is in its usage
// text, in the command line section of docs/design.md (§10) and in the
// table of commands of docs/operate.md.
func TestEveryCommandIsListed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, s10, ok := strings.Cut(string(b), "\n## 10. ")
	if !ok {
		t.Fatal("docs/design.md has no section 10")
	}
	s10, _, _ = strings.Cut(s10, "\n## ")
	op, err := os.ReadFile(filepath.Join(repoRoot, "docs/operate.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range commands() {
		if !strings.Contains(string(op), "\n| `relay "+name) && !strings.Contains(string(op), "| `relay` or `relay "+name) {
			t.Errorf("docs/operate.md's table of commands does not list relay %s", name)
		}
		if !strings.Contains(usage, "\n  "+name+" ") {
			t.Errorf("relay's usage does not list %s", name)
		}
		if !strings.Contains(s10, "`relay "+name) {
			t.Errorf("docs/design.md §10 does not list relay %s", name)
		}
	}
}
