//go:build race

package events_test

// raceEnabled is true under the race detector, which makes Go code several
// times slower: tests shrink their largest bodies so the request timeout
// measures the code, not the detector.
const raceEnabled = true
