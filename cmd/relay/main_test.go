package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpListsTheSubcommands: relay -h, relay --help and relay help all
// print the subcommands, not only run's usage.
func TestHelpListsTheSubcommands(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errs bytes.Buffer
			if code := dispatch(args, &out, &errs); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errs.String())
			}
			for _, cmd := range []string{"run", "demo", "simulate", "check", "route", "api", "silence", "version"} {
				if !strings.Contains(out.String(), "\n  "+cmd+" ") {
					t.Fatalf("relay %s does not list %q:\n%s", strings.Join(args, " "), cmd, out.String())
				}
			}
		})
	}
}
