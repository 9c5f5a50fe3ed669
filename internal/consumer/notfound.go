package consumer

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// sourceNotFound handles a Next that Kinesis answered with
// ResourceNotFound: the shard ended (gone, trimmed past the retention
// period), the reader must stop (stop, the stream was deleted), or neither
// (the shard is still listed: try again after a pause).
func (r *shardReader) sourceNotFound(ctx context.Context, err error) (gone, stop bool) {
	switch r.notFound(ctx) {
	case shardTrimmed:
		r.log.Warn("The shard is no longer listed (trimmed past the retention period); it counts as closed once its delivered records are acked")
		return true, false
	case streamDeleted:
		// The coordinator reports it and stops every reader.
		r.streamGone = true
		r.co.requestDiscovery()
		return false, true
	case streamRecreated:
		// The coordinator clears the deleted stream's state and takes the
		// new stream's shards from the group's start.
		r.log.Warn("Kinesis did not find the shard though it is still listed, and the stream's creation time changed: it was deleted and created again; stopped the shard reader")
		r.streamGone = true
		r.co.requestDiscovery()
		return false, true
	}
	wait := r.co.c.cfg.Backoff.MaxInterval
	if kinesisx.IsUnknownSequence(err) {
		logUnknownCheckpoint(r.log, r.shard.ID, wait, err)
	} else {
		r.log.Warnf("Kinesis did not find the shard though it is still listed; trying again in %v: %v", wait, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return false, !r.wait(ctx, t.C)
}

// notFoundCause is what a shard that Kinesis did not find has become.
type notFoundCause int

const (
	shardStillListed notFoundCause = iota // or the listing failed: try again
	shardTrimmed
	streamDeleted
	// streamRecreated: deleted and created again between two listings, so
	// the shard is listed (the new stream's shard of the same id) while
	// what the reader holds (an iterator, a position) is of the old one.
	streamRecreated
)

// notFound lists the stream to tell a trimmed shard (no longer listed) from
// a deleted stream, and a shard still listed from a stream recreated since
// the coordinator last looked (its creation time changed).
func (r *shardReader) notFound(ctx context.Context) notFoundCause {
	shards, err := kinesisx.ListAllShards(ctx, r.co.api, r.co.configured, r.co.listRetry)
	switch {
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound:
		return streamDeleted
	case err != nil:
		return shardStillListed
	case slices.ContainsFunc(shards, func(s types.Shard) bool { return aws.ToString(s.ShardId) == r.shard.ID }):
		if r.co.recreatedSince(ctx) {
			return streamRecreated
		}
		return shardStillListed
	}
	return shardTrimmed
}
