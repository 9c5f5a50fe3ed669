package faultproxy

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A hidden shard looks trimmed: ListShards leaves it out (over several
// pages too) and GetShardIterator answers ResourceNotFound; shown again,
// it is back.
func TestIntegrationFaultProxyHidesShards(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesalite(t)
	emu.MustCreateStream(t, "hiding", 3)
	p, err := Start(emu.Endpoint, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c := proxiedClient(p)
	ctx := t.Context()
	list := func() []string {
		var ids []string
		in := &kinesis.ListShardsInput{StreamName: aws.String("hiding"), MaxResults: aws.Int32(1)}
		for {
			out, err := c.ListShards(ctx, in)
			require.NoError(t, err)
			for _, s := range out.Shards {
				ids = append(ids, aws.ToString(s.ShardId))
			}
			if out.NextToken == nil {
				return ids
			}
			in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1)}
		}
	}
	all := list()
	require.Len(t, all, 3)

	p.HideShards(all[1])
	p.Clear()
	assert.Equal(t, []string{all[0], all[2]}, list())
	_, err = c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("hiding"), ShardId: aws.String(all[1]), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	require.Error(t, err)
	assert.Equal(t, kinesisx.CodeResourceNotFound, kinesisx.ErrorCode(err))
	_, err = c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("hiding"), ShardId: aws.String(all[0]), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	require.NoError(t, err, "a shard not hidden is read as before")

	p.ShowShards()
	assert.Equal(t, all, list())
}
