package config

import (
	"os"
	"strings"
	"testing"
)

func TestEveryVariableIsDocumentedInTheReadme(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, v := range Variables {
		if !strings.Contains(readme, "| `"+v+"` |") {
			t.Errorf("README.md has no row for %s in its configuration table", v)
		}
	}
}
