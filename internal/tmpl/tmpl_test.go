package tmpl

import "testing"

func TestBoundedPrintfKeepsOrdinaryFormats(t *testing.T) {
	for _, f := range []string{"%d", "%05d", "%-8s", "%.3f", "%x", "%%", "%[1]d", "%+.2e", "%256d"} {
		if _, err := boundedSprintf(f, 1); err != nil {
			t.Errorf("%q refused: %v", f, err)
		}
	}
}
