//go:build !race

package checkpointer

// simDefaultSchedules is the CI slice's count without the race detector.
const simDefaultSchedules = 300
