//go:build !race

package treearchive

// raceEnabled: the race detector is on (this run repeats the plain one).
const raceEnabled = false
