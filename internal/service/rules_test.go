package service

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/route"
)

// TestRulesOverTheSizeCapAreRefusedAtStartAndReload: the service reads rules
// through the same capped loader as relay check, at start-up and at reload.
func TestRulesOverTheSizeCapAreRefusedAtStartAndReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	huge := append([]byte(goodRules+"# "), bytes.Repeat([]byte("x"), route.MaxFileSize)...)
	if err := os.WriteFile(path, huge, 0o600); err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	if _, err := LoadRules(path, none, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("LoadRules of a %d-byte file: %v; want it refused as too large", len(huge), err)
	}
	if err := os.WriteFile(path, []byte(goodRules), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRules(path, none, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, huge, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Reload of a %d-byte file = %v, %v; want it refused as too large", len(huge), changed, err)
	}
}
