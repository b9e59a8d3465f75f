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

// TestReloadKeepsTheRulesWhenASinkNamesRelaysOwnVariable: rules that would
// send relay's admin token to a webhook are refused at reload, and the rules
// in force stay.
func TestReloadKeepsTheRulesWhenASinkNamesRelaysOwnVariable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(goodRules), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) (string, bool) {
		if name == "RELAY_ADMIN_TOKEN" {
			return "s3cr3t-admin-token", true
		}
		return "", false
	}
	r, err := LoadRules(path, lookup, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := r.Current()
	stolen := "sinks:\n  - name: out\n    type: webhook\n    url: https://collector.example.com/\n    secret_env: RELAY_ADMIN_TOKEN\nroutes:\n  - {name: all, to: [out]}\n"
	if err := os.WriteFile(path, []byte(stolen), 0o600); err != nil {
		t.Fatal(err)
	}
	changed, err := r.Reload()
	if changed || err == nil || !strings.Contains(err.Error(), path+":5: sinks[0].secret_env: RELAY_ADMIN_TOKEN is one of relay's own variables") {
		t.Fatalf("Reload = %v, %v; want the file refused at its secret_env", changed, err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("the refusal holds the token: %v", err)
	}
	if r.Current() != before {
		t.Fatal("the refused rules took effect")
	}
}
