package consumer

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// discover lists every shard of the stream. The listing is replaced only
// when complete, so a failed page never hides a parent from the gate.
func (co *coordinator) discover(ctx context.Context) {
	shards, err := kinesisx.ListAllShards(ctx, co.api, co.configured, co.listRetry)
	if err != nil {
		if ctx.Err() == nil {
			co.log.Warnf("Listing shards failed; keeping the previous listing: %v", err)
		}
		return
	}
	listed := make(map[string]Shard, len(shards))
	for _, s := range shards {
		listed[aws.ToString(s.ShardId)] = shardFrom(s)
	}
	co.listed = listed
}

func shardFrom(s types.Shard) Shard {
	sh := Shard{
		ID:       aws.ToString(s.ShardId),
		Parent:   aws.ToString(s.ParentShardId),
		Adjacent: aws.ToString(s.AdjacentParentShardId),
	}
	if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
		sh.Closed = true
	}
	return sh
}
