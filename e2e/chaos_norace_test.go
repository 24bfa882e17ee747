//go:build !race

package e2e

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = false
