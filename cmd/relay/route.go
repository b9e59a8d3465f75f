package main

import (
	"context"
	"fmt"
	"io"
)

func cmdRoute(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay route: not built yet")
	return 2
}
