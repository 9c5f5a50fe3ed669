package reader

import (
	"context"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// sourceNotFound handles a Next that Kinesis answered with
// ResourceNotFound: the shard ended (gone, trimmed past the retention
// period), the reader must stop (stop, the stream was deleted), or neither
// (the shard is still listed: try again after a pause).
func (r *Reader) sourceNotFound(ctx context.Context, err error) (gone, stop bool) {
	switch r.st.NotFound(ctx, r.shard.ID) {
	case source.ShardTrimmed:
		r.log.Warn("The shard is no longer listed (trimmed past the retention period); it counts as closed once its delivered records are acked")
		return true, false
	case source.StreamDeleted:
		// The coordinator reports it and stops every reader.
		r.streamGone = true
		r.st.RequestDiscovery()
		return false, true
	case source.StreamRecreated:
		// The coordinator clears the deleted stream's state and takes the
		// new stream's shards from the group's start.
		r.log.Warn("Kinesis did not find the shard though it is still listed, and the stream's creation time changed: it was deleted and created again; stopped the shard reader")
		r.streamGone = true
		r.st.RequestDiscovery()
		return false, true
	}
	wait := r.st.Config.Backoff.MaxInterval
	if kinesisx.IsUnknownSequence(err) {
		source.LogUnknownCheckpoint(r.log, r.shard.ID, wait, err)
	} else {
		r.log.Warnf("Kinesis did not find the shard though it is still listed; trying again in %v: %v", wait, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return false, !r.wait(ctx, t.C)
}
