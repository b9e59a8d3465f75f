package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func cmdVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	v := version
	if v == "dev" {
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	fmt.Fprintf(stdout, "relay %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
