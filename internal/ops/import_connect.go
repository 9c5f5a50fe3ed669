package ops

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Redpanda Connect's aws_kinesis input keeps one item per stream and shard
// in its DynamoDB table: hash key StreamID (the stream as configured, name
// or ARN), range key ShardID, and the string attributes SequenceNumber (the
// last acknowledged record; it resumes AFTER_SEQUENCE_NUMBER), ClientID (the
// instance holding the shard, removed on a graceful stop) and LeaseTimeout
// (RFC 3339, by that instance's clock). It deletes a shard's item when it
// has read the shard to its end, and never starts a closed shard.
const (
	connectAttrStream   = "StreamID"
	connectAttrShard    = "ShardID"
	connectAttrSequence = "SequenceNumber"
	connectAttrClient   = "ClientID"
	connectAttrLease    = "LeaseTimeout"
)

// readConnectTable reads the items of one stream from a Connect checkpoint
// table. The stream key is sourceStream when given, else whichever of the
// stream's name and ARN the table holds.
func readConnectTable(items []item, table string, stream streamInfo, sourceStream string) (foreignTable, error) {
	byStream := map[string][]item{}
	for _, it := range items {
		id := attrS(it, connectAttrStream)
		byStream[id] = append(byStream[id], it)
	}
	key := sourceStream
	if key == "" {
		var found []string
		for _, k := range slices.Compact([]string{stream.Name, stream.ID}) {
			if _, ok := byStream[k]; ok && k != "" {
				found = append(found, k)
			}
		}
		switch len(found) {
		case 0:
			return foreignTable{}, fmt.Errorf("table %s holds no checkpoints of stream %s (StreamID values in it: %s); name the one to import with --%s",
				table, stream.Name, quoteList(slices.Sorted(maps.Keys(byStream))), flagSourceStream)
		case 1:
			key = found[0]
		default:
			return foreignTable{}, fmt.Errorf("table %s holds checkpoints of the stream under both %q and %q (pipelines configured by name and by ARN); choose one with --%s",
				table, found[0], found[1], flagSourceStream)
		}
	}
	rows, ok := byStream[key]
	if !ok {
		return foreignTable{}, fmt.Errorf("flag --%s: table %s has no items with StreamID %q (it has: %s)", flagSourceStream, table, key, quoteList(slices.Sorted(maps.Keys(byStream))))
	}

	src := foreignTable{
		Describe: fmt.Sprintf("Redpanda Connect table %s (StreamID %s)", table, key),
		Shards:   map[string]foreignShard{},
	}
	now := time.Now()
	for _, it := range rows {
		sh := foreignShard{Shard: attrS(it, connectAttrShard), Owner: attrS(it, connectAttrClient)}
		if sh.Shard == "" {
			return foreignTable{}, fmt.Errorf("table %s: an item of StreamID %s has no ShardID string", table, key)
		}
		if seq := attrS(it, connectAttrSequence); seq != "" {
			p, err := consumer.ParsePosition(seq)
			if err != nil || p.ShardEnd || p.HasSub {
				return foreignTable{}, fmt.Errorf("table %s, shard %s: SequenceNumber %q is not a sequence number", table, sh.Shard, seq)
			}
			sh.Position = p
		}
		if sh.Owner != "" {
			if until, err := time.Parse(time.RFC3339Nano, attrS(it, connectAttrLease)); err == nil && until.After(now) {
				sh.Live, sh.LiveUntil = true, until
			}
		}
		src.Shards[sh.Shard] = sh
	}
	return src, nil
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
