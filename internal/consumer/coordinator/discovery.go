package coordinator

import (
	"context"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// discover lists every shard of the stream. The listing is replaced only
// when complete, so a failed page never hides a parent from the gate, and
// only once the stream is known to be the one the group's checkpoints
// belong to (recreated.go). changed reports a listing that differs from
// the one before (shards added, closed or gone), the first, or a stream
// missing: what a balancing round should see at once.
func (co *coordinator) discover(ctx context.Context) (changed bool) {
	shards, err := kinesisx.ListAllShards(ctx, co.api, co.configured, co.listRetry)
	if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
		co.streamMissing(err)
		return true
	}
	if err != nil {
		if ctx.Err() == nil {
			co.log.Warnf("Listing shards failed; keeping the previous listing: %v", err)
		}
		return false
	}
	if !co.sameStream(ctx) {
		return false
	}
	listed := make(map[string]consumer.Shard, len(shards))
	for _, s := range shards {
		listed[aws.ToString(s.ShardId)] = shardFrom(s)
	}
	changed = !co.listedOnce || !maps.EqualFunc(co.listed, listed, func(a, b consumer.Shard) bool {
		return a.ID == b.ID && a.Parent == b.Parent && a.Adjacent == b.Adjacent && a.Closed == b.Closed
	}) || !co.missingSince.IsZero()
	co.listed = listed
	co.listingFresh, co.listedOnce = true, true
	if !co.missingSince.IsZero() {
		co.log.Infof("The stream exists again after %v; its shards are taken and read from their checkpoints", time.Since(co.missingSince).Round(time.Second))
		co.missingSince, co.missingLogged = time.Time{}, time.Time{}
	}
	return changed
}

// streamMissing handles a listing that says the stream does not exist
// (deleted): every reader stops (committing what was acked and releasing
// its lease), no shard is taken while the stream is missing, and an error is
// logged once per discovery interval until the stream exists again, when
// reading resumes by itself.
func (co *coordinator) streamMissing(err error) {
	co.listed = map[string]consumer.Shard{}
	co.recheck = true
	for _, r := range co.readers {
		if !r.Stopping() {
			r.Stop()
		}
	}
	now := time.Now()
	if co.missingSince.IsZero() {
		co.missingSince = now
		if co.found {
			// A stream of a pattern that is deleted is released by the
			// next listing (follow.go): news, not an error.
			co.log.Infof("The stream no longer exists (deleted); its shard readers are stopped, and the group's next stream listing releases it: %v", err)
		}
	}
	if co.found {
		return
	}
	// A tick of the discovery ticker may come a little early; ninety
	// percent of the interval keeps one error per tick.
	if now.Sub(co.missingLogged) < co.c.cfg.DiscoveryInterval*9/10 {
		return
	}
	co.missingLogged = now
	co.log.Errorf("The stream does not exist (deleted?) since %v ago; its shard readers are stopped and it is looked for again every %v (shard_discovery_interval): %v",
		now.Sub(co.missingSince).Round(time.Second), co.c.cfg.DiscoveryInterval, err)
}

func shardFrom(s types.Shard) consumer.Shard {
	sh := consumer.Shard{
		ID:        aws.ToString(s.ShardId),
		Parent:    aws.ToString(s.ParentShardId),
		Adjacent:  aws.ToString(s.AdjacentParentShardId),
		HashRange: consumer.HashRangeOf(s.HashKeyRange),
	}
	if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
		sh.Closed = true
	}
	return sh
}
