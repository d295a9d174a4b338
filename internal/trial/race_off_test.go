//go:build !race

package trial

// raceEnabled: the race detector is on (this run repeats the plain one).
const raceEnabled = false
