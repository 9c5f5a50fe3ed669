// Package producertest helps tests of the output check what landed in a
// stream: it reads every record of every shard back, raw, in the order a
// reader following shard lineage sees them, and reads aggregated records the
// way a KCL reader does.
package producertest

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Record is a record read back with the shard it was in.
type Record struct {
	ShardID string
	types.Record
}

// ReadAll reads every record of every shard of a stream, from the trim
// horizon to the current end of each shard (the first empty GetRecords
// answer). Shards come parents first (a parent before its children), each in
// sequence order, so the records of one partition key come in the order a
// reader that follows lineage delivers them. It is for tests that finished
// writing before reading.
func ReadAll(ctx context.Context, c *kinesis.Client, stream string) ([]Record, error) {
	got, err := ReadStream(ctx, c, stream)
	if err != nil {
		return nil, err
	}
	return got.Records, nil
}

// Stream is what ReadStream read: the shards, parents first, and their
// records.
type Stream struct {
	Shards  []types.Shard
	Records []Record
}

// ReadStream reads like ReadAll and also returns the shards.
func ReadStream(ctx context.Context, c *kinesis.Client, stream string) (Stream, error) {
	shards, err := kinesisx.ListAllShards(ctx, c, stream)
	if err != nil {
		return Stream{}, err
	}
	shards = LineageOrder(shards)

	got := Stream{Shards: shards}
	for _, s := range shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName:        aws.String(stream),
			ShardId:           s.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return got, fmt.Errorf("getting an iterator for shard %s: %w", aws.ToString(s.ShardId), err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				return got, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
			}
			for _, r := range out.Records {
				got.Records = append(got.Records, Record{ShardID: aws.ToString(s.ShardId), Record: r})
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return got, nil
}

// LineageOrder sorts shards by their depth in the lineage (a shard with no
// listed parent is at depth 0, a child one deeper than its deepest parent),
// then by id, so every parent comes before its children.
func LineageOrder(shards []types.Shard) []types.Shard {
	byID := make(map[string]types.Shard, len(shards))
	for _, s := range shards {
		byID[aws.ToString(s.ShardId)] = s
	}
	depth := map[string]int{}
	var depthOf func(id string) int
	depthOf = func(id string) int {
		if d, ok := depth[id]; ok {
			return d
		}
		s, ok := byID[id]
		if !ok {
			return -1
		}
		d := 0
		for _, parent := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if parent != nil {
				d = max(d, depthOf(*parent)+1)
			}
		}
		depth[id] = d
		return d
	}
	out := slices.Clone(shards)
	slices.SortStableFunc(out, func(a, b types.Shard) int {
		if da, db := depthOf(aws.ToString(a.ShardId)), depthOf(aws.ToString(b.ShardId)); da != db {
			return da - db
		}
		return compareStrings(aws.ToString(a.ShardId), aws.ToString(b.ShardId))
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
