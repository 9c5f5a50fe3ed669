//go:build mutant

package coordinator

import (
	"maps"
	"os"
	"slices"

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

// awaitedRemovals, in a mutant build with
// CONNECT_KINESIS_MUTANT=stop-removal, is empty: Close neither waits for a
// stream being removed nor bounds it, and cancels its readers with the
// run context, without a release.
func awaitedRemovals(removing map[*coordinator]*removal) []*removal {
	if os.Getenv("CONNECT_KINESIS_MUTANT") == "stop-removal" {
		return nil
	}
	return slices.Collect(maps.Values(removing))
}
