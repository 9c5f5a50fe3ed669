//go:build !mutant

package coordinator

import (
	"maps"
	"slices"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// gatedParents are the parents the gate waits for: all of them. A build
// with the `mutant` tag can switch the guard off (mutant.go) so that the
// simulation shows it catches it; a release is never built with that tag.
func gatedParents(s consumer.Shard) []string { return s.Parents() }

// awaitedRemovals are the removals under way that Close bounds by its
// deadline and waits for before it cancels the run context: all of them.
func awaitedRemovals(removing map[*coordinator]*removal) []*removal {
	return slices.Collect(maps.Values(removing))
}
