// Command gendocs writes the references under docs/reference that are
// generated from the code's own tables. go generate ./cmd/relay runs it from
// cmd/relay with the repository's root as its argument; its test fails when
// a committed reference differs from what the code generates.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/route"
)

// regenerate is the command that writes the references again.
const regenerate = "go generate ./cmd/relay"

// outputs are the generated references, by their paths from the
// repository's root.
var outputs = []struct {
	path     string
	generate func() []byte
}{
	{config.ReferencePath, config.ReferenceMarkdown},
	{route.SinksReferencePath, route.SinksMarkdown},
	{route.SchemaPath, route.Schema},
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	for _, o := range outputs {
		path := filepath.Join(root, filepath.FromSlash(o.path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, o.generate(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
	}
}
