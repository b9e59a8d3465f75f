package termtext

import (
	"strings"
	"time"
)

// Duration writes d to the second without zero trailing units: 7s, 2m5s,
// 2m, 72h.
func Duration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Plural returns "s" unless n is 1, for "1 problem", "2 problems".
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
