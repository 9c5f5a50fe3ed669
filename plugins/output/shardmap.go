package output

import (
	"context"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// shardMapRefresh is how often the shard map is re-read, so that after a
// reshard records are grouped by the new shards. The producer also re-reads
// it at once when a record lands on a shard it did not predict.
const shardMapRefresh = time.Minute

// refreshShardMap re-reads the shard map every shardMapRefresh until the
// returned func is called; that func waits for the refresher to end.
func (o *kinesisOutput) refreshShardMap(ctx context.Context, p *producer.Producer) func() {
	// The refresher lives as long as the connection, not the Connect call.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(shardMapRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := p.RefreshShardMap(ctx); err != nil && ctx.Err() == nil {
				o.log.With("stream", o.conf.Stream).Warnf("Refreshing the shard map, keeping the previous one: %v", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// stopLocked ends the current connection's background work; o.mu is held.
func (o *kinesisOutput) stopLocked() {
	if o.stopRefresh != nil {
		o.stopRefresh()
		o.stopRefresh = nil
	}
}
