// Package repotest is what tests that read the repository's own files share:
// which files are the repository's.
package repotest

import (
	"io/fs"
	"path/filepath"
)

// Files returns the files of the repository below root, as slash-separated
// paths relative to root, in lexical order. Git's files and what the bench
// writes (bench-out/, which Git ignores) are not the repository's.
func Files(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); path != root && (n == ".git" || n == "bench-out") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out, err
}
