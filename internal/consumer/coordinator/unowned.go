package coordinator

import "github.com/connect-kinesis/connect-kinesis/internal/consumer"

// reportUnowned sets kinesis_input_shards_unowned: the shards ready to be
// read that nobody reads as this instance sees them after a balancing
// round (no reader here and no live lease of another instance), so that an
// alert fires while a shard has no reader.
func (co *coordinator) reportUnowned(ready []string, leases map[string]consumer.LeaseState) {
	n := 0
	for _, id := range ready {
		if co.readers[id] != nil {
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != "" && ls.Owner != co.c.owner {
			continue
		}
		n++
	}
	co.c.metrics.Unowned.Set(int64(n), co.streamName)
}
