package main

import (
	"context"
	"fmt"
	"io"
)

func cmdDemo(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay demo: not built yet")
	return 2
}
