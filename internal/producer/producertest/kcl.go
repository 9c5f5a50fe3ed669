package producertest

import (
	"crypto/md5"
	"fmt"
	"math/big"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// UserRecord is one user record as a KCL reader delivers it.
type UserRecord struct {
	ShardID      string
	PartitionKey string
	Data         []byte
}

// KCLView is what a KCL 2.x reader delivers from a stream's records.
type KCLView struct {
	Records []UserRecord
	// Aggregates counts the aggregated records read, Dropped those a KCL
	// reader drops whole.
	Aggregates, Dropped int
}

// KCLRead de-aggregates records the way KCL 2.x does
// (AggregatorUtil.deaggregate with the shard's hash key range): a member's
// effective hash key is its explicit hash key, else the MD5 of its partition
// key read as a 128-bit big-endian integer, and an aggregated record with any
// member outside its shard's hash key range is dropped whole. Plain records
// pass as they are. Records must be in reading order (see ReadStream).
func KCLRead(shards []types.Shard, recs []Record) (KCLView, error) {
	type span struct{ start, end *big.Int }
	ranges := map[string]span{}
	for _, s := range shards {
		start, ok1 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		end, ok2 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		if !ok1 || !ok2 {
			return KCLView{}, fmt.Errorf("shard %s has an unreadable hash key range", aws.ToString(s.ShardId))
		}
		ranges[aws.ToString(s.ShardId)] = span{start, end}
	}

	var v KCLView
	for _, r := range recs {
		if !kpl.IsAggregated(r.Data) {
			v.Records = append(v.Records, UserRecord{ShardID: r.ShardID, PartitionKey: aws.ToString(r.PartitionKey), Data: r.Data})
			continue
		}
		v.Aggregates++
		members, err := kpl.Decode(r.Data)
		if err != nil {
			return v, fmt.Errorf("decoding an aggregated record of shard %s: %w", r.ShardID, err)
		}
		rng, ok := ranges[r.ShardID]
		if !ok {
			return v, fmt.Errorf("record of unknown shard %s", r.ShardID)
		}
		inRange := true
		for _, m := range members {
			h, err := EffectiveHashKey(m.PartitionKey, m.ExplicitHashKey)
			if err != nil {
				return v, err
			}
			if h.Cmp(rng.start) < 0 || h.Cmp(rng.end) > 0 {
				inRange = false
				break
			}
		}
		if !inRange {
			v.Dropped++
			continue
		}
		for _, m := range members {
			v.Records = append(v.Records, UserRecord{ShardID: r.ShardID, PartitionKey: m.PartitionKey, Data: m.Data})
		}
	}
	return v, nil
}

// EffectiveHashKey is where Kinesis puts a record: its explicit hash key, or
// the MD5 of its partition key as a 128-bit big-endian integer.
func EffectiveHashKey(partitionKey, explicitHashKey string) (*big.Int, error) {
	if explicitHashKey != "" {
		h, ok := new(big.Int).SetString(explicitHashKey, 10)
		if !ok {
			return nil, fmt.Errorf("explicit hash key %q is not a decimal integer", explicitHashKey)
		}
		return h, nil
	}
	sum := md5.Sum([]byte(partitionKey))
	return new(big.Int).SetBytes(sum[:]), nil
}

// Inversions counts, per partition key, the records that come after a
// record of the same key that was emitted later: the records out of order.
// seq reads the emission counter from a record's data.
func Inversions(recs []UserRecord, seq func(data []byte) (int, error)) (int, error) {
	last := map[string]int{}
	n := 0
	for _, r := range recs {
		s, err := seq(r.Data)
		if err != nil {
			return n, err
		}
		if prev, ok := last[r.PartitionKey]; ok && s < prev {
			n++
			continue
		}
		last[r.PartitionKey] = s
	}
	return n, nil
}
