//go:build !race

package relaysim

// defaultSeeds is how many seeds go test runs.
const defaultSeeds = 200
