package main

import (
	"context"
	"fmt"
	"io"
)

func cmdCheck(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay check: not built yet")
	return 2
}
