package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/relay-energy/relay/internal/route"
)

// The references under docs/reference, this schema among them, are made
// from the code's own tables; a test fails when a committed one is stale.
//go:generate go run ./gendocs ../..

// cmdSchema prints the JSON Schema of the rules file, for editors and for
// checking rules files in other tools.
func cmdSchema(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: relay schema\n\n"+
			"Prints the JSON Schema (draft 2020-12) of the rules file: the keys relay check accepts, the options\n"+
			"of every sink type and the form of their values. "+route.SchemaPath+" is a copy of it,\n"+
			"which rules.example.yaml names for editors.")
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if _, err := stdout.Write(route.Schema()); err != nil {
		fmt.Fprintf(stderr, "relay schema: %v\n", err)
		return 1
	}
	return 0
}
