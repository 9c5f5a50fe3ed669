package chaos

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
)

// uniqueIDs counts the distinct stream records among the deliveries.
func uniqueIDs(ds []Delivery) int {
	seen := make(map[[2]string]bool, len(ds))
	for _, d := range ds {
		seen[[2]string{d.Shard, d.Seq}] = true
	}
	return len(seen)
}

// readStream reads every record of every shard, open or closed, straight
// from the emulator: parents before children, each shard in sequence order,
// so each key's records come in the order a reader following lineage sees.
func (r *runner) readStream(ctx context.Context) ([]Record, error) {
	shards, err := kinesisx.ListAllShards(ctx, r.kc, streamName)
	if err != nil {
		return nil, err
	}
	shards = producertest.LineageOrder(shards)
	var all []Record
	for _, s := range shards {
		it, err := r.kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(streamName), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return nil, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := r.kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return nil, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
			}
			for _, rec := range out.Records {
				var d Delivery
				if err := json.Unmarshal(rec.Data, &d); err != nil {
					return nil, fmt.Errorf("record %s of shard %s is not a chaos record: %w", aws.ToString(rec.SequenceNumber), aws.ToString(s.ShardId), err)
				}
				all = append(all, Record{Shard: aws.ToString(s.ShardId), Seq: aws.ToString(rec.SequenceNumber), K: d.K, C: d.C, Poison: d.Poison})
			}
			if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return all, nil
}
