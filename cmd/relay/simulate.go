package main

import (
	"context"
	"fmt"
	"io"
)

func cmdSimulate(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay simulate: not built yet")
	return 2
}
