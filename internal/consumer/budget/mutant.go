//go:build mutant

package budget

import "os"

// closeGivesBack, in a mutant build with
// CONNECT_KINESIS_MUTANT=budget-close, gives back nothing when a shard
// closes: the room its reader held itself stays held (`make
// simulate-mutants`).
func closeGivesBack(n int64) int64 {
	if os.Getenv("CONNECT_KINESIS_MUTANT") == "budget-close" {
		return 0
	}
	return n
}
