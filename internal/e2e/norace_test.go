//go:build !race

package e2e

// raceEnabled is set when the tests run with -race.
const raceEnabled = false
