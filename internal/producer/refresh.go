package producer

import (
	"context"
)

// SetShardMap gives the producer the stream's shards. Aggregation needs them
// to group records by shard, ordering to send each shard's records one
// request at a time. Without a map, records are not aggregated and an
// ordered producer sends one request at a time.
func (p *Producer) SetShardMap(m *ShardMap) { p.shards.Store(m) }

// RefreshShardMap lists the stream's shards and keeps the new map.
func (p *Producer) RefreshShardMap(ctx context.Context) error {
	m, err := LoadShardMap(ctx, p.api, p.streamID())
	if err != nil {
		return err
	}
	p.shards.Store(m)
	return nil
}

// refreshShardMapFrom refreshes the map after a record landed on a shard that
// seen, the map it was grouped by, did not predict. When another write has
// already replaced seen, that newer map is returned without a listing. If the
// listing fails, seen is returned.
func (p *Producer) refreshShardMapFrom(ctx context.Context, seen *ShardMap) *ShardMap {
	p.refreshing.Lock()
	defer p.refreshing.Unlock()
	if cur := p.shards.Load(); cur != seen {
		return cur
	}
	if err := p.RefreshShardMap(ctx); err != nil {
		p.log.With("stream", p.streamID()).Warnf("Refreshing the shard map after a record landed on an unexpected shard: %v", err)
		return seen
	}
	return p.shards.Load()
}
