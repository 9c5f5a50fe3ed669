//go:build race

package checkpointer

// simDefaultSchedules is the CI slice's count under the race detector
// (`make unit`), which slows the simulation several times; `make
// simulate-ci` runs more without it.
const simDefaultSchedules = 40
