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
// Hashing the keys, and aggregating each shard's entries, spread over the
// cores for a large write (see parallel.go).
func (p *Producer) records(entries []Entry, valid []int, aggregate bool) records {
	shards := p.shards.Load()
	out := records{src: entries, shards: shards, index: valid}
	if shards == nil || !aggregate {
		out.entries = make([]types.PutRecordsRequestEntry, len(valid))
	}
	if shards == nil {
		for k, i := range valid {
			out.entries[k] = plain(&entries[i])
		}
		return out
	}
	// Where each entry goes: its shard, and with aggregation its hash key
	// (an aggregate goes where its first member does).
	out.lane = make([]int, len(valid))
	var hashes []hashKey
	if aggregate {
		hashes = make([]hashKey, len(valid))
	}
	inChunks(len(valid), func(from, to int) {
		for k := from; k < to; k++ {
			i := valid[k]
			if !aggregate {
				out.entries[k] = plain(&entries[i])
			}
			hash, err := entryHashKey(entries[i])
			if err != nil {
				out.lane[k] = -1
				continue
			}
			out.lane[k] = shards.lookup(hash)
			if aggregate {
				hashes[k] = hash
			}
		}
	})
	if !aggregate {
		return out
	}

	// Each shard's entries, in order, aggregate on their own; the shards'
	// records are then laid end to end, shard after shard.
	groups := groupByLane(out.lane, shards.Len())
	parts := make([]records, len(groups))
	eachOf(len(groups), len(valid), func(_, g int) {
		parts[g] = p.aggregateLane(entries, valid, hashes, out.lane[groups[g][0]], groups[g])
	})
	n := 0
	for _, part := range parts {
		n += part.len()
	}
	out = records{src: entries, shards: shards,
		entries: make([]types.PutRecordsRequestEntry, 0, n), index: make([]int, 0, n),
		members: make([][]int, 0, n), lane: make([]int, 0, n)}
	for _, part := range parts {
		out.entries = append(out.entries, part.entries...)
		out.index = append(out.index, part.index...)
		out.members = append(out.members, part.members...)
		out.lane = append(out.lane, part.lane...)
	}
	return out
}

// groupByLane returns the positions of lane grouped by value, each group in
// order, groups in order of value (-1, the unknown shard, first); values
// run from -1 to n-1. Empty groups are left out.
func groupByLane(lane []int, n int) [][]int {
	counts := make([]int, n+1)
	for _, l := range lane {
		counts[l+1]++
	}
	backing := make([]int, 0, len(lane))
	groups := make([][]int, 0, len(counts))
	slot := make([]int, len(counts)) // lane + 1 -> position in groups
	for l, c := range counts {
		if c > 0 {
			slot[l] = len(groups)
			groups = append(groups, backing[len(backing):len(backing):len(backing)+c])
			backing = backing[:len(backing)+c]
		}
	}
	for k, l := range lane {
		g := slot[l+1]
		groups[g] = append(groups[g], k)
	}
	return groups
}

// aggregateLane turns the entries at positions group of valid, all bound
// for shard (-1 if unknown) and in order, into that shard's records: KPL
// aggregates up to the configured limits, and a record alone where
// aggregating costs more than it saves (a lone member) or cannot be done
// (too large, or a shard the map does not know).
func (p *Producer) aggregateLane(entries []Entry, valid []int, hashes []hashKey, shard int, group []int) records {
	out := records{src: entries, members: [][]int{}}
	addPlain := func(i int) {
		out.entries = append(out.entries, plain(&entries[i]))
		out.index = append(out.index, i)
		out.members = append(out.members, nil)
		out.lane = append(out.lane, shard)
	}
	if shard < 0 {
		for _, k := range group {
			addPlain(valid[k])
		}
		return out
	}

	limit := min(p.conf.Aggregation.MaxBytes, p.conf.MaxRecordSize)
	var (
		agg     *kpl.Aggregator
		key     string  // partition key of the first member
		hash    hashKey // where the first member goes
		members []int
	)
	flush := func() {
		switch len(members) {
		case 0:
		case 1:
			// An aggregate of one only costs overhead.
			addPlain(members[0])
		default:
			out.entries = append(out.entries, types.PutRecordsRequestEntry{
				Data:         agg.Bytes(),
				PartitionKey: aws.String(key),
				// The first member's hash key sends the aggregate to the
				// shard it was grouped for, whatever its partition key.
				ExplicitHashKey: aws.String(hash.decimal()),
			})
			out.index = append(out.index, members[0])
			out.members = append(out.members, members)
			out.lane = append(out.lane, shard)
		}
		agg, members = nil, nil
	}
	for _, k := range group {
		i := valid[k]
		e := &entries[i]
		rec := kpl.Record{PartitionKey: e.PartitionKey, ExplicitHashKey: e.ExplicitHashKey, Data: e.Data}
		if emptyAggregate.SizeWith(rec)+len(e.PartitionKey) > limit {
			// Too big to share a record: send it alone, after what its
			// shard already holds, so the shard's order is kept.
			flush()
			addPlain(i)
			continue
		}
		if agg != nil && (len(members) >= p.conf.Aggregation.MaxRecords || agg.SizeWith(rec)+len(key) > limit) {
			flush()
		}
		if agg == nil {
			agg, key, hash = kpl.NewAggregator(), e.PartitionKey, hashes[k]
		}
		agg.Add(rec)
		members = append(members, i)
	}
	flush()
	return out
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
