package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestReadmeAlarmManagementCommandsRun runs every `relay silence` and `relay
// report` command of docs/rules.md's "Alarm management" section, as written,
// against a running relay (the ID of expire is the one add printed), and the
// report of a copied state file on a copy of its state file.
func TestReadmeAlarmManagementCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	b, err := os.ReadFile("../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Alarm management\n")
	if !ok {
		t.Fatal(`docs/rules.md has no "## Alarm management" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lines, reports []string
	for line := range strings.Lines(section) {
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, "relay silence "):
			lines = append(lines, l)
		case strings.HasPrefix(l, "relay report "):
			reports = append(reports, l)
		}
	}
	if len(lines) < 3 || len(reports) < 2 {
		t.Fatalf("found %d relay silence and %d relay report commands in the section, want add, list, expire and reports",
			len(lines), len(reports))
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	dir := t.TempDir()
	addr, stop := startService(t, upstream, dir)
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": addr, "USER": "ana"})
	id := ""
	for _, line := range lines {
		args, err := shellWords(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		args = args[2:] // relay silence
		if args[0] == "expire" {
			args[1] = id
		}
		code, out, errs := runCmd(t, cmdSilence, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
		}
		if m := silenceID.FindStringSubmatch(out); m != nil && id == "" {
			id = m[1]
		}
	}
	// The reports: those of the running relay first, then, once it
	// stopped, those of a copy of its state file; files they write go to a
	// directory of the test's.
	t.Chdir(t.TempDir())
	for _, stopped := range []bool{false, true} {
		if stopped {
			stop()
		}
		for _, line := range reports {
			args, err := shellWords(line)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			args = args[2:] // relay report
			copied := false
			for i, a := range args {
				if a == "--state" && i+1 < len(args) {
					copied = true
					if stopped {
						// The state file and its record log, as the page
						// says to copy them.
						files, err := filepath.Glob(dir + "/relay.db*")
						if err != nil {
							t.Fatal(err)
						}
						if err := os.MkdirAll(filepath.Dir(args[i+1]), 0o755); err != nil {
							t.Fatal(err)
						}
						for _, f := range files {
							if strings.HasSuffix(f, ".budget") || strings.HasSuffix(f, ".lock") {
								continue
							}
							data, err := os.ReadFile(f)
							if err != nil {
								t.Fatal(err)
							}
							to := args[i+1] + strings.TrimPrefix(f, dir+"/relay.db")
							if err := os.WriteFile(to, data, 0o600); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			if copied != stopped {
				continue
			}
			code, out, errs := runCmd(t, cmdReport, args...)
			if code != 0 || out == "" {
				t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
			}
		}
	}
}

// shellWords splits a command line as a POSIX shell would for the quoting
// the docs use (single and double quotes, no escapes, no expansion), and
// drops a trailing comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case (r == '#' || r == '>') && !in:
			// A comment, or a redirection of the output (left to the test).
			return words, nil
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("a quote is not closed")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
