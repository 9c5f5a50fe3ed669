package producer

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"math/big"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// hashKey is a 128-bit hash key, big-endian, so bytes.Compare orders it like
// the number.
type hashKey [16]byte

// ShardMap finds the open shard that owns a hash key. Aggregation needs it:
// only records bound for the same shard may share an aggregated record.
type ShardMap struct {
	ranges []shardRange // the open shards, sorted by start
	// byID holds every listed shard, open or closed, so that a record that
	// landed on a shard the map did not predict can be checked against that
	// shard's range.
	byID map[string]shardRange
}

type shardRange struct {
	id         string
	start, end hashKey
}

// LoadShardMap lists the stream's shards (every page) and maps the open ones.
// Give the stream as the user configured it, by name or by ARN.
func LoadShardMap(ctx context.Context, api kinesisx.ListShardsAPI, stream string) (*ShardMap, error) {
	shards, err := kinesisx.ListAllShards(ctx, api, stream)
	if err != nil {
		return nil, err
	}
	return NewShardMap(shards)
}

// NewShardMap maps the open shards (those without an ending sequence number)
// and remembers the range of every shard listed.
func NewShardMap(shards []types.Shard) (*ShardMap, error) {
	m := &ShardMap{byID: make(map[string]shardRange, len(shards))}
	for _, s := range shards {
		if s.HashKeyRange == nil || s.HashKeyRange.StartingHashKey == nil || s.HashKeyRange.EndingHashKey == nil {
			return nil, fmt.Errorf("shard %s has no hash key range", aws.ToString(s.ShardId))
		}
		start, err := parseHashKey(*s.HashKeyRange.StartingHashKey)
		if err != nil {
			return nil, fmt.Errorf("reading the hash key range of shard %s: %w", aws.ToString(s.ShardId), err)
		}
		end, err := parseHashKey(*s.HashKeyRange.EndingHashKey)
		if err != nil {
			return nil, fmt.Errorf("reading the hash key range of shard %s: %w", aws.ToString(s.ShardId), err)
		}
		r := shardRange{id: aws.ToString(s.ShardId), start: start, end: end}
		m.byID[r.id] = r
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			m.ranges = append(m.ranges, r)
		}
	}
	if len(m.ranges) == 0 {
		return nil, fmt.Errorf("the stream has no open shards")
	}
	sort.Slice(m.ranges, func(i, j int) bool { return bytes.Compare(m.ranges[i].start[:], m.ranges[j].start[:]) < 0 })
	return m, nil
}

// Len is the number of open shards.
func (m *ShardMap) Len() int { return len(m.ranges) }

// lookup returns the index of the shard owning k, or -1 if no open shard
// covers it (a stale map during a reshard).
func (m *ShardMap) lookup(k hashKey) int {
	i := sort.Search(len(m.ranges), func(i int) bool { return bytes.Compare(m.ranges[i].start[:], k[:]) > 0 }) - 1
	if i < 0 || bytes.Compare(k[:], m.ranges[i].end[:]) > 0 {
		return -1
	}
	return i
}

// holds reports whether shard id covers k. ok is false when the map does not
// know the shard.
func (m *ShardMap) holds(id string, k hashKey) (in, ok bool) {
	r, ok := m.byID[id]
	if !ok {
		return false, false
	}
	return bytes.Compare(k[:], r.start[:]) >= 0 && bytes.Compare(k[:], r.end[:]) <= 0, true
}

// ShardFor returns the id of the shard that owns an entry, or "" if unknown.
func (m *ShardMap) ShardFor(e Entry) string {
	k, err := entryHashKey(e)
	if err != nil {
		return ""
	}
	if i := m.lookup(k); i >= 0 {
		return m.ranges[i].id
	}
	return ""
}

// entryHashKey is where Kinesis puts e: its explicit hash key, or the MD5 of
// its partition key read as a 128-bit big-endian integer.
func entryHashKey(e Entry) (hashKey, error) {
	if e.ExplicitHashKey != "" {
		return parseHashKey(e.ExplicitHashKey)
	}
	return md5.Sum([]byte(e.PartitionKey)), nil
}

func parseHashKey(s string) (hashKey, error) {
	var k hashKey
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return k, fmt.Errorf("%q is not a 128-bit hash key", s)
	}
	n.FillBytes(k[:])
	return k, nil
}

func (k hashKey) decimal() string { return new(big.Int).SetBytes(k[:]).String() }
