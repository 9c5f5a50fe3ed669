package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Owners publish each shard's lag and last delivery with their lease
// renewals: one store call per renewal for all shards, however many
// batches they deliver.
func TestProgressIsPublishedPerRenewalNotPerBatch(t *testing.T) {
	api := consumertest.NewKinesis()
	shards := []string{"shardId-000000000000", "shardId-000000000001"}
	for _, id := range shards {
		api.Add(id, &consumertest.KinesisShard{Records: 1000000})
	}
	st := consumertest.NewStore(600 * time.Millisecond)
	cfg := testConfig()
	started := time.Now()
	c := startConsumer(t, cfg, api, st)
	log := &acked{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, log)

	require.Eventually(t, func() bool {
		ps, calls := st.Published()
		return len(ps) == len(shards) && calls >= 3
	}, 10*time.Second, 10*time.Millisecond)
	ps, calls := st.Published()
	elapsed := time.Since(started)
	renewals := int(elapsed/(cfg.LeasePeriod/3)) + 1
	assert.LessOrEqual(t, calls, renewals, "at most one publish per renewal period (%v elapsed)", elapsed)
	assert.Greater(t, len(log.all())/cfg.Limit, calls, "fewer publishes than delivered batches")
	for _, id := range shards {
		p := ps[id]
		assert.Zero(t, p.LagMillis, "%s: the fake stream reports no lag", id)
		assert.WithinDuration(t, time.Now(), p.LastDelivered, 5*time.Second, "%s: delivered recently", id)
	}
}
