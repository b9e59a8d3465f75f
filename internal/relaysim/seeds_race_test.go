//go:build race

package relaysim

// defaultSeeds is how many seeds go test -race runs: the race detector
// makes each about ten times slower.
const defaultSeeds = 40
