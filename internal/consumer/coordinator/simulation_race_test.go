//go:build race

package coordinator

// csimDefaultSchedules is the count under the race detector (make unit).
const csimDefaultSchedules = 10
