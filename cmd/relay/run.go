package main

import (
	"context"
	"fmt"
	"io"
)

func cmdRun(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay run: not built yet")
	return 2
}
