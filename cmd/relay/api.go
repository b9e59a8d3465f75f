package main

import (
	"context"
	"fmt"
	"io"
)

func cmdAPI(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay api: not built yet")
	return 2
}
