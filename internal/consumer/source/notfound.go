package source

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// NotFoundCause is what a shard that Kinesis did not find has become.
type NotFoundCause int

const (
	ShardStillListed NotFoundCause = iota // or the listing failed: try again
	ShardTrimmed
	StreamDeleted
	// StreamRecreated: deleted and created again between two listings, so
	// the shard is listed (the new stream's shard of the same id) while
	// what the reader holds (an iterator, a position) is of the old one.
	StreamRecreated
)

// NotFound lists the stream to tell a trimmed shard (no longer listed)
// from a deleted stream, and a shard still listed from a stream recreated
// since the coordinator last looked (recreated says whether its creation
// time changed).
func NotFound(ctx context.Context, api consumer.KinesisAPI, stream, shard string, listRetry failsafe.Policy[*kinesis.ListShardsOutput], recreated func(context.Context) bool) NotFoundCause {
	shards, err := kinesisx.ListAllShards(ctx, api, stream, listRetry)
	switch {
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound:
		return StreamDeleted
	case err != nil:
		return ShardStillListed
	case slices.ContainsFunc(shards, func(s types.Shard) bool { return aws.ToString(s.ShardId) == shard }):
		if recreated(ctx) {
			return StreamRecreated
		}
		return ShardStillListed
	}
	return ShardTrimmed
}
