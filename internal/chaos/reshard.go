package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// openShards lists the stream's open shards from the emulator, sorted by
// their hash key ranges.
func (r *runner) openShards(ctx context.Context) ([]types.Shard, error) {
	return r.openShardsOf(ctx, streamName)
}

// openShardsOf is openShards of the named stream (the soak has several).
func (r *runner) openShardsOf(ctx context.Context, stream string) ([]types.Shard, error) {
	all, err := kinesisx.ListAllShards(ctx, r.kc, stream)
	if err != nil {
		return nil, err
	}
	var shards []types.Shard
	for _, s := range all {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			shards = append(shards, s)
		}
	}
	sort.Slice(shards, func(i, j int) bool {
		return bigOf(shards[i].HashKeyRange.StartingHashKey).Cmp(bigOf(shards[j].HashKeyRange.StartingHashKey)) < 0
	})
	return shards, nil
}

// closedByEarlierAttempt says a split or merge of shard that failed with
// err (an answer of Kinesis, not a call that went unanswered) was carried
// out all the same: the SDK sends a call again when an attempt is not
// answered in time (callTimeout), and kinesis-mock, stalled under an
// hour's load, carries out a call it answers too late; the attempt after
// it finds the stream UPDATING or the shard closed. The shard closed means
// the first attempt went through: nothing else reshards the stream.
func (r *runner) closedByEarlierAttempt(ctx context.Context, stream string, err error, shard *string) bool {
	var answer smithy.APIError
	if !errors.As(err, &answer) {
		return false
	}
	if _, werr := r.waitActive(ctx, stream); werr != nil {
		return false
	}
	open, lerr := r.openShardsOf(ctx, stream)
	if lerr != nil {
		return false
	}
	for _, s := range open {
		if aws.ToString(s.ShardId) == aws.ToString(shard) {
			return false
		}
	}
	r.logf("chaos: %s of %s answered %s, and the shard is closed: an earlier attempt of the call, not answered in time, carried it out", stream, aws.ToString(shard), answer.ErrorCode())
	return true
}

// bigOf parses a decimal hash key.
func bigOf(s *string) *big.Int {
	b, _ := new(big.Int).SetString(aws.ToString(s), 10)
	return b
}

// split splits the widest open shard in two.
func (r *runner) split(ctx context.Context) error { return r.splitStream(ctx, streamName) }

// splitStream splits the widest open shard of stream in two.
func (r *runner) splitStream(ctx context.Context, stream string) error {
	shards, err := r.openShardsOf(ctx, stream)
	if err != nil {
		return err
	}
	var widest types.Shard
	var width *big.Int
	for _, s := range shards {
		w := new(big.Int).Sub(bigOf(s.HashKeyRange.EndingHashKey), bigOf(s.HashKeyRange.StartingHashKey))
		if width == nil || w.Cmp(width) > 0 {
			widest, width = s, w
		}
	}
	return r.splitShard(ctx, stream, widest)
}

// splitShard splits the open shard s of stream in the middle of its hash
// key range.
func (r *runner) splitShard(ctx context.Context, stream string, s types.Shard) error {
	width := new(big.Int).Sub(bigOf(s.HashKeyRange.EndingHashKey), bigOf(s.HashKeyRange.StartingHashKey))
	mid := new(big.Int).Add(bigOf(s.HashKeyRange.StartingHashKey), new(big.Int).Rsh(width, 1))
	if err := r.outlastStalls(ctx, func() error {
		_, err := r.kc.SplitShard(ctx, &kinesis.SplitShardInput{
			StreamName: aws.String(stream), ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
		})
		return err
	}); err != nil && !r.closedByEarlierAttempt(ctx, stream, err, s.ShardId) {
		return fmt.Errorf("splitting shard %s: %w", aws.ToString(s.ShardId), err)
	}
	r.logf("chaos: split %s", aws.ToString(s.ShardId))
	_, err := r.waitActive(ctx, stream)
	return err
}

// merge merges the first two adjacent open shards.
func (r *runner) merge(ctx context.Context) error { return r.mergeStream(ctx, streamName) }

// mergeStream merges the first two adjacent open shards of stream.
func (r *runner) mergeStream(ctx context.Context, stream string) error {
	shards, err := r.openShardsOf(ctx, stream)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(shards); i++ {
		end := bigOf(shards[i].HashKeyRange.EndingHashKey)
		if new(big.Int).Add(end, big.NewInt(1)).Cmp(bigOf(shards[i+1].HashKeyRange.StartingHashKey)) != 0 {
			continue
		}
		if err := r.outlastStalls(ctx, func() error {
			_, err := r.kc.MergeShards(ctx, &kinesis.MergeShardsInput{
				StreamName: aws.String(stream), ShardToMerge: shards[i].ShardId, AdjacentShardToMerge: shards[i+1].ShardId,
			})
			return err
		}); err != nil && !r.closedByEarlierAttempt(ctx, stream, err, shards[i].ShardId) {
			return fmt.Errorf("merging shards %s and %s: %w", aws.ToString(shards[i].ShardId), aws.ToString(shards[i+1].ShardId), err)
		}
		r.logf("chaos: merged %s and %s", aws.ToString(shards[i].ShardId), aws.ToString(shards[i+1].ShardId))
		_, err = r.waitActive(ctx, stream)
		return err
	}
	return errors.New("no two adjacent open shards to merge")
}
