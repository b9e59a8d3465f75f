package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The memory phase counts the executable's pages in the relay's resident
// memory: its relay process must link what relay's image links (-tags
// nodemo), no more (the bench's simulator driver, nats-server) and no less.
func TestMemoryPhaseRelayLinksWhatRelayLinks(t *testing.T) {
	deps := func(args ...string) []string {
		t.Helper()
		args = append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, args...)
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.Fields(string(out))
	}
	relay := deps("-tags", "nodemo", "github.com/relay-energy/relay/cmd/relay")
	mem := deps(memrelayPkg)
	own := func(pkg string) bool {
		return pkg == "github.com/relay-energy/relay/cmd/relay" || pkg == memrelayPkg ||
			strings.HasPrefix(pkg, "github.com/relay-energy/relay/cmd/relaybench/internal/")
	}
	for _, pkg := range relay {
		if !own(pkg) && !slices.Contains(mem, pkg) {
			t.Errorf("relay links %s, the memory phase's relay process does not", pkg)
		}
	}
	for _, pkg := range mem {
		if !own(pkg) && !slices.Contains(relay, pkg) {
			t.Errorf("the memory phase's relay process links %s, relay does not", pkg)
		}
	}
}
