package ops

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

func listedShard(id string, closed bool, parents ...string) types.Shard {
	sh := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
	if closed {
		sh.SequenceNumberRange.EndingSequenceNumber = aws.String("9")
	}
	if len(parents) > 0 {
		sh.ParentShardId = aws.String(parents[0])
	}
	if len(parents) > 1 {
		sh.AdjacentParentShardId = aws.String(parents[1])
	}
	return sh
}

func TestPlanImportMarksClosedShardsWithoutEntries(t *testing.T) {
	seq := func(s string) consumer.Position { return consumer.Position{Sequence: s} }
	end := consumer.Position{ShardEnd: true}
	// a (closed) -> b (closed) -> c (open); d open root.
	stream := streamInfo{Name: "s", ID: "s", Shards: []types.Shard{
		listedShard("a", true), listedShard("b", true, "a"), listedShard("c", false, "b"), listedShard("d", false),
	}}
	for _, tc := range []struct {
		name   string
		source map[string]foreignShard
		want   map[string]consumer.Position
	}{
		{"finished ancestors without entries are finished", map[string]foreignShard{"c": {Shard: "c", Position: seq("5")}},
			map[string]consumer.Position{"a": end, "b": end, "c": seq("5")}},
		{"a closed shard below an unfinished one is read after it", map[string]foreignShard{"a": {Shard: "a", Position: seq("3")}},
			map[string]consumer.Position{"a": seq("3")}},
		{"sentinels give no checkpoint", map[string]foreignShard{"a": {Shard: "a", Position: end}, "b": {Shard: "b", Sentinel: kclTrimHorizon}},
			map[string]consumer.Position{"a": end}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planImport(foreignTable{Shards: tc.source}, stream, true, time.Time{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, plan.Positions)
			assert.Contains(t, plan.Notes, "d", "every shard is explained")
		})
	}
}

func TestReadKCLTable(t *testing.T) {
	stream := streamInfo{Name: "orders", ID: "arn:aws:kinesis:us-east-1:111122223333:stream/orders",
		Created: time.Unix(1700000000, 0), Shards: []types.Shard{listedShard("shardId-000000000001", false)}}
	lease := func(key, cp string, sub int64) item { return kclLeaseItem(key, cp, sub) }

	t.Run("checkpoints, sub-sequences and sentinels", func(t *testing.T) {
		src, err := readKCLTable([]item{
			lease("shardId-000000000000", "SHARD_END", 0),
			lease("shardId-000000000001", "4960", 3),
			lease("shardId-000000000002", "LATEST", 0),
		}, "app", stream, "")
		require.NoError(t, err)
		assert.Equal(t, consumer.Position{ShardEnd: true}, src.Shards["shardId-000000000000"].Position)
		assert.Equal(t, "4960/3", src.Shards["shardId-000000000001"].Position.String())
		assert.Equal(t, kclLatest, src.Shards["shardId-000000000002"].Sentinel)
	})
	t.Run("multi-stream: the stream's account, name and creation epoch", func(t *testing.T) {
		src, err := readKCLTable([]item{
			lease("111122223333:orders:1700000000:shardId-000000000001", "10", 0),
			lease("111122223333:orders:1600000000:shardId-000000000001", "20", 0),
			lease("999999999999:orders:1700000000:shardId-000000000001", "30", 0),
			lease("111122223333:clicks:1700000000:shardId-000000000001", "40", 0),
		}, "app", stream, "")
		require.NoError(t, err)
		require.Len(t, src.Shards, 1)
		assert.Equal(t, "10/0", src.Shards["shardId-000000000001"].Position.String())
	})
	t.Run("items that are not shard leases are skipped", func(t *testing.T) {
		coordinator := lease("Leader", "", 0)
		coordinator["entityType"], coordinator["leaseOwner"] = strAttr("LEADER"), strAttr("worker-1")
		marked := lease("shardId-000000000002", "7", 0)
		marked["entityType"] = strAttr("LEASE")
		noCheckpoint := lease("shardId-000000000003", "", 0)
		delete(noCheckpoint, "checkpoint")
		src, err := readKCLTable([]item{
			lease("shardId-000000000001", "4960", 3), coordinator, marked, noCheckpoint,
			{"wid": strAttr("worker-1"), "lut": numAttr(1)},
			lease("111122223333:orders:1700000000:coordinator", "5", 0),
		}, "app", stream, "")
		require.NoError(t, err)
		assert.Equal(t, []string{"shardId-000000000001", "shardId-000000000002"}, slices.Sorted(maps.Keys(src.Shards)),
			"an entityType of lease is a lease")
		require.Len(t, src.Warnings, 2)
		assert.Contains(t, src.Warnings[0], "skipped 4 items")
		for _, want := range []string{`leaseKey "Leader" (entityType LEADER)`, `leaseKey "shardId-000000000003" (no checkpoint)`,
			`wid "worker-1" (no leaseKey)`, `leaseKey "111122223333:orders:1700000000:coordinator" (not a shard id)`} {
			assert.Contains(t, src.Warnings[0], want)
		}
	})
	for _, tc := range []struct {
		name  string
		items []item
		want  string
	}{
		{"bad checkpoint", []item{lease("shardId-000000000001", "yesterday", 0)}, "neither a sequence number nor"},
		{"another application's table", []item{lease("shardId-000000000077", "5", 0)}, "none of its 1 leases is a shard of stream orders"},
		{"no lease of the stream", []item{lease("111122223333:clicks:1:shardId-000000000001", "5", 0)}, `stream identifiers in it: "111122223333:clicks:1"`},
		{"no lease at all", []item{{"key": strAttr("Migration3.0"), "cv": strAttr("CLIENT_VERSION_3X")}}, `holds no KCL shard lease`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readKCLTable(tc.items, "app", stream, "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadConnectTable(t *testing.T) {
	stream := streamInfo{Name: "orders", ID: "arn:aws:kinesis:us-east-1:111122223333:stream/orders"}
	row := func(streamID, shard, seq string) item {
		return item{"StreamID": strAttr(streamID), "ShardID": strAttr(shard), "SequenceNumber": strAttr(seq)}
	}
	t.Run("by ARN, live claims", func(t *testing.T) {
		live := row(stream.ID, "shardId-000000000001", "77")
		live["ClientID"], live["LeaseTimeout"] = strAttr("c1"), strAttr(time.Now().Add(time.Minute).Format(time.RFC3339Nano))
		stale := row(stream.ID, "shardId-000000000002", "78")
		stale["ClientID"], stale["LeaseTimeout"] = strAttr("c2"), strAttr(time.Now().Add(-time.Minute).Format(time.RFC3339Nano))
		src, err := readConnectTable([]item{live, stale, row("other", "shardId-000000000001", "1")}, "t", stream, "")
		require.NoError(t, err)
		assert.True(t, src.Shards["shardId-000000000001"].Live)
		assert.False(t, src.Shards["shardId-000000000002"].Live)
		assert.Equal(t, "77", src.Shards["shardId-000000000001"].Position.String())
	})
	t.Run("name and ARN both present", func(t *testing.T) {
		_, err := readConnectTable([]item{row("orders", "shardId-000000000001", "1"), row(stream.ID, "shardId-000000000001", "2")}, "t", stream, "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--source-stream")
		src, err := readConnectTable([]item{row("orders", "shardId-000000000001", "1"), row(stream.ID, "shardId-000000000001", "2")}, "t", stream, "orders")
		require.NoError(t, err)
		assert.Equal(t, "1", src.Shards["shardId-000000000001"].Position.String())
	})
}

// TestImportRefusesOpenShardConflicts guards against an import closing an
// open shard, or starting one under parents the listing does not give it,
// unless --allow-open-shard names the shard.
func TestImportRefusesOpenShardConflicts(t *testing.T) {
	// a (closed) split into b and c (open); d an open root.
	stream := streamInfo{Name: "s", ID: "s", Shards: []types.Shard{
		listedShard("a", true), listedShard("b", false, "a"), listedShard("c", false, "a"), listedShard("d", false),
	}}
	end := consumer.Position{ShardEnd: true}
	src := foreignTable{Shards: map[string]foreignShard{
		"a": {Shard: "a", Position: end, Parents: []string{}},
		"b": {Shard: "b", Sentinel: kclTrimHorizon, Parents: []string{"a"}},
		"c": {Shard: "c", Sentinel: kclTrimHorizon, Parents: []string{"x"}},
		"d": {Shard: "d", Position: end, Parents: []string{}},
	}}
	plan, err := planImport(src, stream, true, time.Time{})
	require.NoError(t, err)
	var got []string
	for _, c := range openShardConflicts(src, stream, plan, nil) {
		got = append(got, c.String())
	}
	require.Len(t, got, 2, "%v", got)
	assert.Contains(t, got[0], "c: a start (trim_horizon) in the source for a shard with parents [x], but the stream lists it open with parents [a]")
	assert.Contains(t, got[1], "d: SHARD_END in the source, but the stream lists it open")
	assert.Empty(t, openShardConflicts(src, stream, plan, map[string]bool{"c": true, "d": true}), "the override names both")
	// A closed shard's SHARD_END and a child's start under its listed
	// parents are what a KCL table of this stream holds.
	assert.NotContains(t, strings.Join(got, "\n"), "a: ")
	assert.NotContains(t, strings.Join(got, "\n"), "b: ")
}

// TestReadKCLTableChecksASingleIdentifiersEpoch guards against importing a
// deleted incarnation's leases when it is the only identifier of the name.
func TestReadKCLTableChecksASingleIdentifiersEpoch(t *testing.T) {
	stream := streamInfo{Name: "orders", ID: "arn:aws:kinesis:us-east-1:111122223333:stream/orders",
		Created: time.Unix(1700000000, 0), Shards: []types.Shard{listedShard("shardId-000000000000", false)}}
	_, err := readKCLTable([]item{kclLeaseItem("111122223333:orders:1600000000:shardId-000000000000", "SHARD_END", 0)}, "app", stream, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `only under "111122223333:orders:1600000000"`)
	assert.Contains(t, err.Error(), "--allow-open-shard shardId-000000000000")
	assert.Contains(t, err.Error(), "--source-stream")
	src, err := readKCLTable([]item{kclLeaseItem("111122223333:orders:1600000000:shardId-000000000000", "SHARD_END", 0)}, "app", stream, "111122223333:orders:1600000000")
	require.NoError(t, err, "naming the identifier imports it")
	assert.True(t, src.Shards["shardId-000000000000"].Position.ShardEnd)
}
