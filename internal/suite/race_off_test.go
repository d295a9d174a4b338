//go:build !race

package suite_test

// raceEnabled: the race detector is on (this run repeats the plain one).
const raceEnabled = false
