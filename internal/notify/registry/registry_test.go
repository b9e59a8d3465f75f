package registry

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEverySinkTypeRunsTheConformanceSuite: a sink type lands with its
// package's conformance test, which runs the shared suite on that type.
func TestEverySinkTypeRunsTheConformanceSuite(t *testing.T) {
	for _, typ := range Types() {
		path := filepath.Join("..", typ.Name, "conformance_test.go")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("sink type %s: %v", typ.Name, err)
			continue
		}
		if !strings.Contains(string(b), "sinktest.Run(") || !strings.Contains(string(b), "Type: "+typ.Name+".Type") {
			t.Errorf("sink type %s: %s does not run sinktest.Run on %s.Type", typ.Name, path, typ.Name)
		}
	}
}

// TestEverySinkTypeIsDocumented: the README's sink table has a row per
// type, and rules.example.yaml shows every type and every option.
func TestEverySinkTypeIsDocumented(t *testing.T) {
	readme := read(t, "../../../README.md")
	example := read(t, "../../../rules.example.yaml")
	for _, typ := range Types() {
		row := regexp.MustCompile("(?m)^\\| `" + typ.Name + "` \\|.*$").FindString(readme)
		if row == "" {
			t.Errorf("README.md's sink table has no row for %s", typ.Name)
		}
		for _, o := range typ.Options {
			// The row names every option a sink needs or that reads the
			// environment; webhook_url stays out (webhook_url_env is the one
			// to use).
			if strings.HasSuffix(o.Key, "_env") && !strings.Contains(row, "`"+o.Key+"`") {
				t.Errorf("README.md's row of %s does not name its variable option %s", typ.Name, o.Key)
			}
		}
		if !regexp.MustCompile(`(?m)^\s*#?\s*type: ` + typ.Name + `\s*$`).MatchString(example) {
			t.Errorf("rules.example.yaml shows no %s sink", typ.Name)
		}
		for _, o := range typ.Options {
			if !regexp.MustCompile(`(?m)^\s*#?\s*` + o.Key + `:`).MatchString(example) {
				t.Errorf("rules.example.yaml does not show option %s of the %s sink", o.Key, typ.Name)
			}
		}
		if typ.Doc == "" || typ.Decode == nil {
			t.Errorf("sink type %s has no doc or no decoder", typ.Name)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
