//go:build !race

package checkpointer

// simDefaultSchedules is the count of a plain `go test` of the package;
// `make simulate-ci` runs more (-sim.schedules).
const simDefaultSchedules = 100
