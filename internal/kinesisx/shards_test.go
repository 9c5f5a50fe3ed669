package kinesisx

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pagedShards serves shards two to a page and fails the calls listed in
// failAt (counted from 1) with a transient error.
type pagedShards struct {
	shards []string
	failAt map[int]bool
	calls  []*kinesis.ListShardsInput
}

func (p *pagedShards) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	p.calls = append(p.calls, in)
	if p.failAt[len(p.calls)] {
		return nil, errors.New("connection reset")
	}
	start := 0
	if in.NextToken != nil {
		_, _ = fmt.Sscanf(*in.NextToken, "page-%d", &start)
	}
	end := min(start+2, len(p.shards))
	out := &kinesis.ListShardsOutput{}
	for _, id := range p.shards[start:end] {
		out.Shards = append(out.Shards, types.Shard{ShardId: aws.String(id)})
	}
	if end < len(p.shards) {
		out.NextToken = aws.String(fmt.Sprintf("page-%d", end))
	}
	return out, nil
}

func TestListAllShards(t *testing.T) {
	ids := []string{"s0", "s1", "s2", "s3", "s4"}
	retry := retrypolicy.NewBuilder[*kinesis.ListShardsOutput]().WithMaxRetries(2).WithDelay(time.Millisecond).Build()

	t.Run("every page, name on the first call only", func(t *testing.T) {
		api := &pagedShards{shards: ids}
		got, err := ListAllShards(t.Context(), api, "orders")
		require.NoError(t, err)
		require.Len(t, got, 5)
		assert.Equal(t, "s4", aws.ToString(got[4].ShardId))
		require.Len(t, api.calls, 3)
		assert.Equal(t, "orders", aws.ToString(api.calls[0].StreamName))
		assert.Nil(t, api.calls[1].StreamName, "a follow-up page must name only the token")
	})
	t.Run("ARN is sent as StreamARN", func(t *testing.T) {
		api := &pagedShards{shards: ids[:1]}
		_, err := ListAllShards(t.Context(), api, "arn:aws:kinesis:us-east-1:000000000000:stream/orders")
		require.NoError(t, err)
		assert.Nil(t, api.calls[0].StreamName)
		assert.NotNil(t, api.calls[0].StreamARN)
	})
	t.Run("a failed page is retried, not skipped", func(t *testing.T) {
		api := &pagedShards{shards: ids, failAt: map[int]bool{2: true}}
		got, err := ListAllShards(t.Context(), api, "orders", retry)
		require.NoError(t, err)
		assert.Len(t, got, 5)
	})
	t.Run("without retries a failed page fails the listing", func(t *testing.T) {
		api := &pagedShards{shards: ids, failAt: map[int]bool{2: true}}
		got, err := ListAllShards(t.Context(), api, "orders")
		require.Error(t, err)
		assert.Nil(t, got, "a partial listing must never be returned")
		assert.Contains(t, err.Error(), "orders")
	})
}
