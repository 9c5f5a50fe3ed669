package coordinator

import (
	"slices"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// readyShards returns, sorted, the listed shards that may be read now: not
// closed in the store, and every parent either closed in the store (read to
// its end, every record acked, final checkpoint committed) or no longer
// listed because it was trimmed past retention. This gate is what keeps
// per-key order across splits and merges.
func readyShards(listed map[string]consumer.Shard, closed map[string]bool) []string {
	var ready []string
	for id, s := range listed {
		if closed[id] {
			continue
		}
		ok := true
		for _, p := range gatedParents(s) {
			if _, stillListed := listed[p]; stillListed && !closed[p] {
				ok = false
				break
			}
		}
		if ok {
			ready = append(ready, id)
		}
	}
	slices.Sort(ready)
	return ready
}

// ReadyShards is the gate readyShards applies, for the store simulation
// (plugins/checkpointer), which takes shards by the coordinator's rule.
func ReadyShards(listed map[string]consumer.Shard, closed map[string]bool) []string {
	return readyShards(listed, closed)
}
