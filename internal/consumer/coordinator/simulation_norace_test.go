//go:build !race

package coordinator

// csimDefaultSchedules is the count of a plain `go test` of the package;
// `make simulate-ci` runs more (-sim.schedules).
const csimDefaultSchedules = 50
