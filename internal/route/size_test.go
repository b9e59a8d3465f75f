package route

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestAliasBombIsRefusedWithoutExpanding: YAML aliases that expand to
// aliases ("billion laughs", 10^10 nodes) in a file well under the size cap
// are refused without the memory their expansion would take: yaml.v3 keeps
// aliases as references, and the parser visits at most 200,000 nodes.
func TestAliasBombIsRefusedWithoutExpanding(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("sinks:\n  - {name: out, type: console}\nroutes:\n  - name: all\n    to: [out]\n    match: {station_ids: *a9}\n")
	if b.Len() > MaxFileSize {
		t.Fatalf("the bomb is %d bytes, over the cap", b.Len())
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse("rules.yaml", []byte(b.String()), nil)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("the bomb was accepted")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", alloc>>20)
	}
}
