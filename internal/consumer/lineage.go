package consumer

import "slices"

// Shard is what discovery knows of a shard.
type Shard struct {
	ID       string
	Parent   string
	Adjacent string
	// Closed is true when the shard has an ending sequence number: it takes
	// no more writes and reading it reaches an end.
	Closed bool
	// HashRange is the shard's hash key range, nil when the listing gives
	// none: user records of aggregates outside it are dropped (hashrange.go).
	HashRange *hashRange
}

// parents returns the shard's parents, without empty ids.
func (s Shard) parents() []string {
	var ps []string
	for _, p := range []string{s.Parent, s.Adjacent} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// readyShards returns, sorted, the listed shards that may be read now: not
// closed in the store, and every parent either closed in the store (read to
// its end, every record acked, final checkpoint committed) or no longer
// listed because it was trimmed past retention. This gate is what keeps
// per-key order across splits and merges.
func readyShards(listed map[string]Shard, closed map[string]bool) []string {
	var ready []string
	for id, s := range listed {
		if closed[id] {
			continue
		}
		ok := true
		for _, p := range s.parents() {
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
