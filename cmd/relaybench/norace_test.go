//go:build !race

package main

// raceEnabled is set when the tests run with -race.
const raceEnabled = false
