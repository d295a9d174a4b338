//go:build !race

package swebench

const raceEnabled = false
