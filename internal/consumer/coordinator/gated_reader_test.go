package coordinator

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// hidingKinesis leaves one shard out of every listing while hide is set.
type hidingKinesis struct {
	*consumertest.Kinesis
	shard string
	hide  atomic.Bool
}

func (h *hidingKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	out, err := h.Kinesis.ListShards(ctx, in, opts...)
	if err == nil && h.hide.Load() {
		out.Shards = slices.DeleteFunc(out.Shards, func(s types.Shard) bool { return aws.ToString(s.ShardId) == h.shard })
	}
	return out, err
}

// A listing that left a parent out (a paged listing with a shard trimmed
// between its pages did, in the fakes) lets its child be taken as if the
// parent were trimmed. When the parent is listed again, unread, it must
// still be taken: the child's reader, no longer ready, must not fill the
// instance's share. Before, one instance held the child and counted it as
// its one shard of one ready, and the parent stayed unread for good (the
// hundred-reshard test's stall under -race, shard 66 never leased while
// its child 67 was read).
func TestAParentListedAgainIsReadBesideItsChild(t *testing.T) {
	t.Parallel()
	const parent, child = "shardId-000000000000", "shardId-000000000001"
	k := consumertest.NewKinesis()
	k.Add(parent, &consumertest.KinesisShard{Records: 3, Closed: true})
	k.Add(child, &consumertest.KinesisShard{Parent: parent, Records: 2})
	api := &hidingKinesis{Kinesis: k, shard: parent}
	api.hide.Store(true)
	c := startConsumer(t, testConfig(), api, consumertest.NewStore(time.Second))
	var log acked
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ackAll(ctx, c, &log)
	require.Eventually(t, func() bool { return len(log.all()) == 2 }, 10*time.Second, 10*time.Millisecond, "the child is read while its parent is not listed")
	// The parent is listed again as the child gets two more records, and
	// its first reads are throttled for about a second: the child's reader
	// stops, the parent is read, and the child's new records come after
	// the parent's (read on, the child delivered them first).
	k.Mu.Lock()
	k.Shards[child].Records = 4
	k.Throttle = map[string]int{parent: 20}
	k.Mu.Unlock()
	api.hide.Store(false)
	require.Eventually(t, func() bool { return len(log.all()) == 7 }, 10*time.Second, 10*time.Millisecond,
		"the parent, listed again, is read too: %v", log.all())
	assert.Equal(t, []string{
		child + "/1", child + "/2",
		parent + "/1", parent + "/2", parent + "/3",
		child + "/3", child + "/4",
	}, log.all(), "once the parent is listed, the child's records wait for it")
}
