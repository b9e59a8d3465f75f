package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTheCommittedReferencesAreWhatTheCodeGenerates: every generated
// reference under docs/reference is as the code's tables make it today.
func TestTheCommittedReferencesAreWhatTheCodeGenerates(t *testing.T) {
	for _, o := range outputs {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(o.path)))
		if err != nil {
			t.Errorf("%s: %v: run %s from the repository's root", o.path, err, regenerate)
			continue
		}
		if string(b) != string(o.generate()) {
			t.Errorf("%s is not what the code generates: run %s from the repository's root", o.path, regenerate)
		}
	}
}
