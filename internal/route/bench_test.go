package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
)

// BenchmarkMatch routes one event through 200 routes; it matches the last
// two (the first of them continues). In "ids" the other routes constrain ids
// and codes, which the index rules out with a few map lookups; in "globs" a
// quarter of them only have station-name globs, which are tried one by one.
func BenchmarkMatch(b *testing.B) {
	const routes = 200
	for _, withGlobs := range []bool{false, true} {
		name := "ids"
		if withGlobs {
			name = "globs"
		}
		b.Run(name, func(b *testing.B) {
			var y strings.Builder
			y.WriteString(sinksABCD + "routes:\n")
			for i := range routes - 2 {
				switch {
				case i%4 == 0:
					fmt.Fprintf(&y, "  - {name: r%d, match: {levels: [0, 1, 2], station_ids: [s%d, s%d, s%d]}, to: [a]}\n", i, i+100, i+200, i+300)
				case i%4 == 1:
					fmt.Fprintf(&y, "  - {name: r%d, match: {tenant_ids: [t1], device_sns: [%s]}, to: [b]}\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("X%d, ", i), 12), ", "))
				case i%4 == 2 && withGlobs:
					fmt.Fprintf(&y, "  - {name: r%d, match: {station_names: [\"South %d *\", \"East*\"], transitions: [start]}, to: [c]}\n", i, i)
				case i%4 == 2:
					fmt.Fprintf(&y, "  - {name: r%d, match: {system_ids: [y%d], transitions: [start]}, to: [c]}\n", i, i)
				default:
					fmt.Fprintf(&y, "  - {name: r%d, match: {event_codes: [E%d], device_names: [\"*inverter ?\"]}, to: [d]}\n", i, i)
				}
			}
			y.WriteString("  - {name: north, match: {station_names: [\"North *\"], device_types: [bms]}, to: [a, b], continue: true}\n")
			y.WriteString("  - {name: last, to: [b, c]}\n")
			r := mustParse(b, y.String())
			ev := newEvent(event.Start, nil)
			dst := make([]string, 0, 8)
			if got := r.AppendSinks(dst, ev); strings.Join(got, ",") != "a,b,c" {
				b.Fatalf("sinks = %v", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				dst = r.AppendSinks(dst[:0], ev)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/routes, "ns/route")
		})
	}
}

// BenchmarkInterval asks the intervals of manageRules whether they are
// active (what muting a route or opening a maintenance window costs per
// event) and for their next 3 occurrences (what relay check prints): a
// weekday interval, a night across midnight, and a monthly window whose
// next occurrences lie months ahead.
func BenchmarkInterval(b *testing.B) {
	r := mustParse(b, manageRules)
	from := utc(2026, 11, 23, 12, 0)
	for _, name := range []string{"business-hours", "night", "first-monday-morning"} {
		iv := r.Intervals[name]
		b.Run("Contains/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				iv.Contains(from)
			}
		})
		b.Run("Next3/"+name, func(b *testing.B) {
			if got := iv.Next(from, 3); len(got) != 3 {
				b.Fatalf("Next = %v", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				iv.Next(from, 3)
			}
		})
	}
}
