package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestReadmeSilenceCommandsRun runs every `relay silence` command of the
// README's "Alarm management" section, as written, against a running relay
// (the ID of expire is the one add printed).
func TestReadmeSilenceCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Alarm management\n")
	if !ok {
		t.Fatal(`README.md has no "## Alarm management" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lines []string
	for line := range strings.Lines(section) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "relay silence ") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 3 {
		t.Fatalf("found %d relay silence commands in the section, want add, list and expire", len(lines))
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	addr, _ := startService(t, upstream, t.TempDir())
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
}

// shellWords splits a command line as a POSIX shell would for the quoting
// the README uses (single and double quotes, no escapes, no expansion), and
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
		case r == '#' && !in:
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
