//go:build mutant

package coordinator

import (
	"os"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// gatedParents, in a mutant build with CONNECT_KINESIS_MUTANT=gate-parents,
// waits for the first parent only: a merge's child is read once one of its
// two parents is closed (`make simulate-mutants`).
func gatedParents(s consumer.Shard) []string {
	ps := s.Parents()
	if os.Getenv("CONNECT_KINESIS_MUTANT") == "gate-parents" && len(ps) > 1 {
		return ps[:1]
	}
	return ps
}
