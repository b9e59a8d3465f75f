//go:build nodemo

package main

import (
	"context"
	"fmt"
	"io"
)

// cmdDemo is left out of production images (built with -tags nodemo), which
// then carry neither the simulator nor the embedded NATS server.
func cmdDemo(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "relay demo: not in this build (built with -tags nodemo); run it from source: go run ./cmd/relay demo")
	return 2
}
