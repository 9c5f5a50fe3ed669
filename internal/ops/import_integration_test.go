package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
	"github.com/connect-kinesis/connect-kinesis/plugins/input"
)

// userRecord is one record as a consumer sees it: a KPL aggregate counts
// once per sub-record.
type userRecord struct {
	shard, seq string
	sub        int64 // -1: not aggregated
	data       string
}

func (u userRecord) position() consumer.Position {
	if u.sub < 0 {
		return consumer.Position{Sequence: u.seq}
	}
	return consumer.Position{Sequence: u.seq, SubSequence: u.sub, HasSub: true}
}

// reshardedStream is a two-shard stream whose shard 0 was split into 2 and
// 3 after records were written, with records on every shard, one KPL
// aggregate of four on shard 2, and an end marker as the last record of
// each open shard.
type reshardedStream struct {
	arn     string
	epoch   int64
	records map[string][]userRecord // by shard, in order
}

const (
	shard0 = "shardId-000000000000"
	shard1 = "shardId-000000000001"
	shard2 = "shardId-000000000002"
	shard3 = "shardId-000000000003"
)

func buildReshardedStream(t *testing.T, k *testenv.Kinesis, name string) reshardedStream {
	t.Helper()
	ctx := t.Context()
	c := k.Client()
	rs := reshardedStream{arn: k.MustCreateStream(t, name, 2), records: map[string][]userRecord{}}
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	require.NoError(t, err)
	rs.epoch = aws.ToTime(sum.StreamDescriptionSummary.StreamCreationTimestamp).Unix()

	hashKeys := func() map[string]string {
		out, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		require.NoError(t, err)
		keys := map[string]string{}
		for _, sh := range out.Shards {
			keys[*sh.ShardId] = *sh.HashKeyRange.StartingHashKey
		}
		return keys
	}
	put := func(shard, hashKey, data string, aggregate []kpl.Record) {
		body := []byte(data)
		if aggregate != nil {
			body = kpl.Encode(aggregate)
		}
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{
			StreamName: aws.String(name), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hashKey), Data: body,
		})
		require.NoError(t, err)
		require.Equal(t, shard, *out.ShardId)
		if aggregate == nil {
			rs.records[shard] = append(rs.records[shard], userRecord{shard, *out.SequenceNumber, -1, data})
			return
		}
		for i, r := range aggregate {
			rs.records[shard] = append(rs.records[shard], userRecord{shard, *out.SequenceNumber, int64(i), string(r.Data)})
		}
	}

	keys := hashKeys()
	for _, shard := range []string{shard0, shard1} {
		for i := range 20 {
			put(shard, keys[shard], fmt.Sprintf("%s-before-%d", shard, i), nil)
		}
	}
	_, err = c.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(name), ShardToSplit: aws.String(shard0),
		NewStartingHashKey: aws.String("85070591730234615865843651857942052864"),
	})
	require.NoError(t, err)
	_, err = k.WaitActive(ctx, name)
	require.NoError(t, err)
	keys = hashKeys()
	for _, shard := range []string{shard1, shard2, shard3} {
		for i := range 20 {
			if shard == shard2 && i == 10 {
				var subs []kpl.Record
				// Each user record carries the shard's hash key: a reader
				// drops an aggregate with a member outside its shard's
				// range, as KCL does.
				for j := range 4 {
					subs = append(subs, kpl.Record{PartitionKey: "u", ExplicitHashKey: keys[shard], Data: []byte(fmt.Sprintf("%s-agg-%d", shard, j))})
				}
				put(shard, keys[shard], "", subs)
			}
			put(shard, keys[shard], fmt.Sprintf("%s-after-%d", shard, i), nil)
		}
		put(shard, keys[shard], "end-"+shard, nil)
	}
	return rs
}

// after lists the user records of shard past p (all of them for a zero p).
func (rs reshardedStream) after(shard string, p consumer.Position) []string {
	var out []string
	for _, u := range rs.records[shard] {
		if p.IsZero() || u.position().Compare(p) > 0 {
			out = append(out, u.data)
		}
	}
	return out
}

// find returns the user record of shard whose data is data.
func (rs reshardedStream) find(t *testing.T, shard, data string) userRecord {
	t.Helper()
	i := slices.IndexFunc(rs.records[shard], func(u userRecord) bool { return u.data == data })
	require.GreaterOrEqual(t, i, 0, "no record %s on %s", data, shard)
	return rs.records[shard][i]
}

// readGroup runs this project's kinesis input for the group until it has
// delivered the end marker of every open shard, and returns each shard's
// delivered payloads in delivery order.
func readGroup(t *testing.T, k *testenv.Kinesis, redisURL, stream, group string) map[string][]string {
	t.Helper()
	return readGroupFrom(t, k, redisURL, stream, group, "trim_horizon")
}

// readGroupFrom is readGroup with the input's start_position.
func readGroupFrom(t *testing.T, k *testenv.Kinesis, redisURL, stream, group, startPosition string) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]string{}
	ends := map[string]bool{}
	done := make(chan struct{})
	sb := service.NewStreamBuilder()
	require.NoError(t, sb.SetLoggerYAML("level: warn"))
	require.NoError(t, sb.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %q ]
  region: %s
  endpoint: %s
  credentials: { id: %s, secret: %s }
  checkpoint:
    redis: { url: %s }
    group: %s
    commit_period: 200ms
  lease: { period: 3s, rebalance_period: 300ms }
  poll_interval: 200ms
  idle_poll_interval: 200ms
  shard_discovery_interval: 1s
  start_position: %s
`, stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, startPosition)))
	require.NoError(t, sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b {
			shard, _ := m.MetaGet(input.MetaShard)
			data, _ := m.AsBytes()
			got[shard] = append(got[shard], string(data))
			if strings.HasPrefix(string(data), "end-") && !ends[shard] {
				ends[shard] = true
				if len(ends) == 3 {
					close(done)
				}
			}
		}
		return nil
	}))
	s, err := sb.Build()
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(context.Background()) }()
	select {
	case <-done:
	case err := <-runErr:
		t.Fatalf("the stream stopped before the end of shards 1, 2 and 3: %v", err)
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the input did not reach the end of shards 1, 2 and 3 within 60s; delivered: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
	<-runErr
	mu.Lock()
	defer mu.Unlock()
	return got
}

func createTable(t *testing.T, d *testenv.DynamoDB, name string, hash string, rangeKey string) {
	t.Helper()
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(hash), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: ddbtypes.KeyTypeHash}},
	}
	if rangeKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String(rangeKey), AttributeType: ddbtypes.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, ddbtypes.KeySchemaElement{AttributeName: aws.String(rangeKey), KeyType: ddbtypes.KeyTypeRange})
	}
	_, err := d.Client().CreateTable(t.Context(), in)
	require.NoError(t, err)
	// dynalite creates tables asynchronously even with createTableMs 0.
	require.NoError(t, dynamodb.NewTableExistsWaiter(d.Client(), func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second }).Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: in.TableName}, 30*time.Second))
}

func putItems(t *testing.T, d *testenv.DynamoDB, table string, items ...item) {
	t.Helper()
	for _, it := range items {
		_, err := d.Client().PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
		require.NoError(t, err)
	}
}

func strAttr(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func numAttr(v int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func setAttr(v ...string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberSS{Value: v} }

// kclLeaseItem is a lease as the KCL's DynamoDBLeaseSerializer writes it
// for a stopped worker (no leaseOwner).
func kclLeaseItem(leaseKey, checkpoint string, sub int64, parents ...string) item {
	it := item{
		"leaseKey":                     strAttr(leaseKey),
		"leaseCounter":                 numAttr(42),
		"ownerSwitchesSinceCheckpoint": numAttr(0),
		"checkpoint":                   strAttr(checkpoint),
		"checkpointSubSequenceNumber":  numAttr(sub),
	}
	if len(parents) > 0 {
		it["parentShardId"] = setAttr(parents...)
	}
	return it
}

// TestIntegrationImportResumesAfterForeignCheckpoints builds a Redpanda
// Connect checkpoint table and KCL lease tables (single- and multi-stream)
// in their real schemas for a resharded stream, imports each into a group,
// and reads the group with this project's input: every record after the
// imported checkpoints is delivered once, nothing at or before them.
func TestIntegrationImportResumesAfterForeignCheckpoints(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	rs := buildReshardedStream(t, k, "orders")

	base := func(sub, group string, extra ...string) []string {
		return append([]string{sub, "--redis-url", r.URL(), "--group", group, "--stream", "orders",
			"--region", testenv.Region, "--endpoint", k.Endpoint}, extra...)
	}
	importArgs := func(group, from, table string, extra ...string) []string {
		return base("import", group, append([]string{"--from", from, "--table", table, "--dynamodb-endpoint", d.Endpoint}, extra...)...)
	}
	// Checkpoints at known records: the tenth of shard 1; on shard 2 a
	// plain record, or (KCL) the second sub-record of the aggregate.
	ck1 := rs.find(t, shard1, shard1+"-before-9")
	ck2plain := rs.find(t, shard2, shard2+"-after-4")
	ck2agg := rs.find(t, shard2, shard2+"-agg-1")
	require.Equal(t, int64(1), ck2agg.sub)

	assertResumed := func(t *testing.T, group string, want map[string]consumer.Position) {
		t.Helper()
		got := readGroup(t, k, r.URL(), "orders", group)
		assert.Empty(t, got[shard0], "the finished parent is not read again")
		for _, shard := range []string{shard1, shard2, shard3} {
			assert.Equal(t, rs.after(shard, want[shard]), got[shard],
				"%s: every record after the imported checkpoint %v, once and in order", shard, want[shard])
		}
	}

	t.Run("redpanda connect table", func(t *testing.T) {
		const table = "connect-checkpoints"
		createTable(t, d, table, "StreamID", "ShardID")
		// A gracefully stopped Connect pipeline: its final checkpoints have
		// no ClientID; finished shard 0's item was deleted; shard 3 never
		// got one. Another stream's item shares the table.
		putItems(t, d, table,
			item{"StreamID": strAttr("orders"), "ShardID": strAttr(shard1), "SequenceNumber": strAttr(ck1.seq)},
			item{"StreamID": strAttr("orders"), "ShardID": strAttr(shard2), "SequenceNumber": strAttr(ck2plain.seq)},
			item{"StreamID": strAttr("other"), "ShardID": strAttr(shard0), "SequenceNumber": strAttr("1")},
		)

		out, err := runCLI(t.Context(), importArgs("from-connect", SourceConnect, table, "--dry-run")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "dry run")
		assert.Contains(t, out, shard0+": (none) -> SHARD_END")
		assert.Contains(t, out, shard1+": (none) -> "+ck1.seq)
		assert.Contains(t, out, shard3+": no entry in the source: starts like a new shard")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "from-connect", rs.arn), "a dry run writes nothing")

		out, err = runCLI(t.Context(), importArgs("from-connect", SourceConnect, table)...)
		require.NoError(t, err, out)
		assertResumed(t, "from-connect", map[string]consumer.Position{shard1: ck1.position(), shard2: ck2plain.position()})
	})

	t.Run("kcl single-stream lease table", func(t *testing.T) {
		const table = "kcl-app"
		createTable(t, d, table, "leaseKey", "")
		putItems(t, d, table,
			kclLeaseItem(shard0, "SHARD_END", 0),
			kclLeaseItem(shard1, ck1.seq, 0),
			kclLeaseItem(shard2, ck2agg.seq, ck2agg.sub, shard0),
			kclLeaseItem(shard3, "TRIM_HORIZON", 0, shard0),
		)
		out, err := runCLI(t.Context(), importArgs("from-kcl", SourceKCL, table)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, shard2+": (none) -> "+ck2agg.seq+"/1")
		assertResumed(t, "from-kcl", map[string]consumer.Position{shard1: ck1.position(), shard2: ck2agg.position()})
	})

	t.Run("kcl multi-stream lease table", func(t *testing.T) {
		const table = "kcl-multi"
		createTable(t, d, table, "leaseKey", "")
		ident := fmt.Sprintf("000000000000:orders:%d", rs.epoch)
		multi := func(shard, checkpoint string, sub int64, parents ...string) item {
			it := kclLeaseItem(ident+":"+shard, checkpoint, sub, parents...)
			it["streamName"], it["shardId"] = strAttr(ident), strAttr(shard)
			return it
		}
		// The KCL deleted finished shard 0's lease once its children
		// started; a stream of the same name created earlier left leases.
		putItems(t, d, table,
			multi(shard1, ck1.seq, 0),
			multi(shard2, ck2agg.seq, ck2agg.sub, shard0),
			multi(shard3, "TRIM_HORIZON", 0, shard0),
			func() item {
				it := kclLeaseItem("000000000000:orders:1000:"+shard1, "5", 0)
				it["streamName"], it["shardId"] = strAttr("000000000000:orders:1000"), strAttr(shard1)
				return it
			}(),
		)
		out, err := runCLI(t.Context(), importArgs("from-kcl-multi", SourceKCL, table)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "KCL lease table kcl-multi (stream "+ident+")")
		assert.Contains(t, out, shard0+": (none) -> SHARD_END")
		assertResumed(t, "from-kcl-multi", map[string]consumer.Position{shard1: ck1.position(), shard2: ck2agg.position()})
	})

	t.Run("refusals", func(t *testing.T) {
		const table = "connect-live"
		createTable(t, d, table, "StreamID", "ShardID")
		putItems(t, d, table, item{
			"StreamID": strAttr(rs.arn), "ShardID": strAttr(shard1), "SequenceNumber": strAttr(ck1.seq),
			"ClientID": strAttr("connect-instance-1"), "LeaseTimeout": strAttr(time.Now().Add(time.Hour).Format(time.RFC3339Nano)),
		})
		out, err := runCLI(t.Context(), importArgs("live", SourceConnect, table)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "connect-instance-1")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "live", rs.arn))

		st := groupStore(t, r.URL(), "live", rs.arn)
		_, err = st.Acquire(t.Context(), shard3, "our-instance")
		require.NoError(t, err)
		out, err = runCLI(t.Context(), importArgs("live", SourceConnect, table, "--dry-run")...)
		require.NoError(t, err, out)
		assert.Contains(t, out, "would be refused without --"+flagFenceReaders+": the group holds live leases on "+shard3)
		_, err = runCLI(t.Context(), importArgs("live", SourceConnect, table, "--"+flagIgnoreLiveSource, "--"+flagFenceReaders)...)
		require.NoError(t, err)
		got := groupCheckpoints(t, r.URL(), "live", rs.arn)
		assert.Equal(t, ck1.position(), got[shard1])

		_, err = runCLI(t.Context(), importArgs("live", SourceConnect, "missing-table")...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `DynamoDB table "missing-table" not found`)
	})

	t.Run("export, then reset --to sequences restores the import", func(t *testing.T) {
		before := groupCheckpoints(t, r.URL(), "from-kcl", rs.arn)
		startsBefore, err := groupStore(t, r.URL(), "from-kcl", rs.arn).ShardStarts(t.Context())
		require.NoError(t, err)
		require.Equal(t, consumer.StartTrimHorizon, startsBefore[shard3].Mode, "the import stored the KCL child lease's TRIM_HORIZON")
		file := filepath.Join(t.TempDir(), "backup.json")
		out, err := runCLI(t.Context(), base("export", "from-kcl", "--output", file)...)
		require.NoError(t, err, out)
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"`+shard0+`": "SHARD_END"`)
		assert.Contains(t, string(raw), `"shard_starts": {`)

		out, err = runCLI(t.Context(), base("reset", "from-kcl", "--to", "latest", "--yes")...)
		require.NoError(t, err, out)
		assert.Empty(t, groupCheckpoints(t, r.URL(), "from-kcl", rs.arn))
		out, err = runCLI(t.Context(), base("reset", "from-kcl", "--to", "sequences="+file, "--yes")...)
		require.NoError(t, err, out)
		assert.Equal(t, before, groupCheckpoints(t, r.URL(), "from-kcl", rs.arn))
		closed, err := groupStore(t, r.URL(), "from-kcl", rs.arn).ClosedShards(t.Context())
		require.NoError(t, err)
		assert.True(t, closed[shard0], "the closed set is restored with the checkpoints")
		startsAfter, err := groupStore(t, r.URL(), "from-kcl", rs.arn).ShardStarts(t.Context())
		require.NoError(t, err)
		assert.Equal(t, startsBefore, startsAfter, "a shard that was to start at its beginning still does")
		assert.Contains(t, out, shard3+" starts at trim_horizon while it has no checkpoint")
	})
}

func groupStore(t *testing.T, redisURL, group, streamID string) *checkpointer.Store {
	t.Helper()
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = redisURL, group
	cp, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Close() })
	return cp.Stream(streamID)
}

func groupCheckpoints(t *testing.T, redisURL, group, streamID string) map[string]consumer.Position {
	t.Helper()
	ps, err := groupStore(t, redisURL, group, streamID).Checkpoints(t.Context())
	require.NoError(t, err)
	return ps
}
