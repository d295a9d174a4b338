//go:build race

package swebench

const raceEnabled = true
