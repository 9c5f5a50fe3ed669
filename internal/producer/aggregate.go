package producer

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// records turns the valid entries into Kinesis records: one per entry, or,
// with aggregate set and a shard map known, KPL aggregates of entries bound
// for the same shard. With a map, every record also carries the shard it is
// predicted to land on. Records of one shard keep the order of their entries.
func (p *Producer) records(entries []Entry, valid []int, aggregate bool) records {
	shards := p.shards.Load()
	out := records{src: entries, shards: shards}
	if shards == nil {
		out.entries = make([]types.PutRecordsRequestEntry, len(valid))
		out.index = valid
		for k, i := range valid {
			out.entries[k] = plain(&entries[i])
		}
		return out
	}
	out.entries = make([]types.PutRecordsRequestEntry, 0, len(valid))
	out.index = make([]int, 0, len(valid))
	out.lane = make([]int, 0, len(valid))
	addPlain := func(i, shard int) {
		out.entries = append(out.entries, plain(&entries[i]))
		out.index = append(out.index, i)
		out.lane = append(out.lane, shard)
		if out.members != nil {
			out.members = append(out.members, nil)
		}
	}
	if !aggregate {
		for _, i := range valid {
			addPlain(i, shardOf(shards, entries[i]))
		}
		return out
	}

	limit := min(p.conf.Aggregation.MaxBytes, p.conf.MaxRecordSize)
	type open struct {
		agg     *kpl.Aggregator
		key     string  // partition key of the first member
		hash    hashKey // where the first member goes
		members []int
	}
	out.members = [][]int{}
	byShard := make(map[int]*open)
	flush := func(shard int) {
		o := byShard[shard]
		if o == nil || len(o.members) == 0 {
			return
		}
		delete(byShard, shard)
		if len(o.members) == 1 {
			// An aggregate of one only costs overhead.
			addPlain(o.members[0], shard)
			return
		}
		out.entries = append(out.entries, types.PutRecordsRequestEntry{
			Data:         o.agg.Bytes(),
			PartitionKey: aws.String(o.key),
			// The first member's hash key sends the aggregate to the
			// shard it was grouped for, whatever its partition key.
			ExplicitHashKey: aws.String(o.hash.decimal()),
		})
		out.index = append(out.index, o.members[0])
		out.members = append(out.members, o.members)
		out.lane = append(out.lane, shard)
	}

	for _, i := range valid {
		e := entries[i]
		hash, err := entryHashKey(e)
		shard := -1
		if err == nil {
			shard = shards.lookup(hash)
		}
		rec := kpl.Record{PartitionKey: e.PartitionKey, ExplicitHashKey: e.ExplicitHashKey, Data: e.Data}
		if shard < 0 || emptyAggregate.SizeWith(rec)+len(e.PartitionKey) > limit {
			// Too big to share a record, or a shard the map does not know:
			// send it alone, after what its shard already holds, so the
			// shard's order is kept.
			if shard >= 0 {
				flush(shard)
			}
			addPlain(i, shard)
			continue
		}
		o := byShard[shard]
		if o != nil && (len(o.members) >= p.conf.Aggregation.MaxRecords || o.agg.SizeWith(rec)+len(o.key) > limit) {
			flush(shard)
			o = nil
		}
		if o == nil {
			o = &open{agg: kpl.NewAggregator(), key: e.PartitionKey, hash: hash}
			byShard[shard] = o
		}
		o.agg.Add(rec)
		o.members = append(o.members, i)
	}
	for shard := range shards.ranges {
		flush(shard)
	}
	return out
}

// shardOf is the index of the open shard e goes to, or -1.
func shardOf(m *ShardMap, e Entry) int {
	k, err := entryHashKey(e)
	if err != nil {
		return -1
	}
	return m.lookup(k)
}

// emptyAggregate sizes a record alone in an aggregate. It is only read, so it
// is shared by concurrent writes.
var emptyAggregate = kpl.NewAggregator()

// plain is the Kinesis record of e alone. It points into e rather than
// copying the keys: entries outlive the write.
func plain(e *Entry) types.PutRecordsRequestEntry {
	r := types.PutRecordsRequestEntry{Data: e.Data, PartitionKey: &e.PartitionKey}
	if e.ExplicitHashKey != "" {
		r.ExplicitHashKey = &e.ExplicitHashKey
	}
	return r
}

// misplaced reports whether record k, accepted on shard landed, is an
// aggregate a KCL reader of that shard would drop: one with a member outside
// the shard's hash range. That happens when the stream was resharded after
// the map the aggregate was grouped by was read. A record on the shard it
// was grouped for is never misplaced, and plain records are readable
// wherever they land.
func (p *Producer) misplaced(ctx context.Context, recs *records, k int, landed string) bool {
	if recs.members == nil || recs.members[k] == nil || landed == "" || landed == recs.predicted(k) {
		return false
	}
	m := p.refreshShardMapFrom(ctx, recs.shards)
	for _, i := range recs.members[k] {
		h, err := entryHashKey(recs.src[i])
		if err != nil {
			return true
		}
		if in, known := m.holds(landed, h); !in || !known {
			return true
		}
	}
	return false
}
