package ops

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationImportGuardRails imports KCL and Connect tables into groups
// of a resharded stream and checks what an operator switching over would
// trip on: a KCL child lease at TRIM_HORIZON is read from the shard's
// beginning even with start_position latest, an AT_TIMESTAMP lease needs
// its timestamp, a lease that names a KCL owner is refused, positions of
// another stream are refused, and moving checkpoints back needs
// --allow-rewind.
func TestIntegrationImportGuardRails(t *testing.T) {
	useEmulatorCredentials(t)
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	d := testenv.NewDynalite(t)
	rs := buildReshardedStream(t, k, "guarded")
	importArgs := func(group, from, table string, extra ...string) []string {
		return append([]string{"import", "--redis-url", r.URL(), "--group", group, "--stream", "guarded",
			"--region", testenv.Region, "--endpoint", k.Endpoint, "--from", from, "--table", table, "--dynamodb-endpoint", d.Endpoint}, extra...)
	}
	showArgs := func(group string) []string {
		return []string{"show", "--redis-url", r.URL(), "--group", group, "--stream", "guarded", "--region", testenv.Region, "--endpoint", k.Endpoint}
	}
	ck1 := rs.find(t, shard1, shard1+"-before-9")
	ck2 := rs.find(t, shard2, shard2+"-after-4")

	t.Run("a KCL child at TRIM_HORIZON starts at its beginning", func(t *testing.T) {
		const table = "kcl-trim-horizon"
		createTable(t, d, table, "leaseKey", "")
		putItems(t, d, table,
			kclLeaseItem(shard0, "SHARD_END", 0),
			kclLeaseItem(shard1, ck1.seq, 0),
			kclLeaseItem(shard2, ck2.seq, 0, shard0),
			kclLeaseItem(shard3, "TRIM_HORIZON", 0, shard0),
		)
		out, err := runCLI(t.Context(), importArgs("trim", SourceKCL, table)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, shard3+": TRIM_HORIZON in the source (not started): starts at the shard's beginning")
		out, err = runCLI(t.Context(), showArgs("trim")...)
		require.NoError(t, err, out)
		assert.Regexp(t, shard3+`\s.*\(none; starts at trim_horizon\)`, out, "show says where the child starts")

		// With start_position latest, the child's records written before
		// the switch are read all the same, since the KCL would have.
		got := readGroupFrom(t, k, r.URL(), "guarded", "trim", "latest")
		assert.Equal(t, rs.after(shard3, consumer.Position{}), got[shard3], "every record of the child, from its beginning")
		assert.Equal(t, rs.after(shard1, ck1.position()), got[shard1])
	})

	t.Run("AT_TIMESTAMP needs the application's timestamp", func(t *testing.T) {
		const table = "kcl-at-timestamp"
		createTable(t, d, table, "leaseKey", "")
		putItems(t, d, table, kclLeaseItem(shard1, ck1.seq, 0), kclLeaseItem(shard3, "AT_TIMESTAMP", 0, shard0))
		out, err := runCLI(t.Context(), importArgs("at", SourceKCL, table)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "--at-timestamp")
		assert.Contains(t, err.Error(), shard3)
		out, err = runCLI(t.Context(), importArgs("at", SourceKCL, table, "--at-timestamp", "2024-05-01T12:00:00Z")...)
		require.NoError(t, err, out)
		out, err = runCLI(t.Context(), showArgs("at")...)
		require.NoError(t, err, out)
		assert.Regexp(t, shard3+`\s.*\(none; starts at at_timestamp=2024-05-01T12:00:00Z\)`, out)
	})

	t.Run("a KCL lease with an owner is refused, naming the owner", func(t *testing.T) {
		const table = "kcl-live"
		createTable(t, d, table, "leaseKey", "")
		owned := kclLeaseItem(shard1, ck1.seq, 0)
		owned["leaseOwner"] = strAttr("worker-7")
		putItems(t, d, table, owned)
		out, err := runCLI(t.Context(), importArgs("kcl-live", SourceKCL, table)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), shard1+" (owner worker-7")
		assert.Contains(t, err.Error(), "stopped, not paused")
		assert.Empty(t, groupCheckpoints(t, r.URL(), "kcl-live", rs.arn), "nothing written")
		out, err = runCLI(t.Context(), importArgs("kcl-live", SourceKCL, table, "--"+flagIgnoreLiveSource)...)
		require.NoError(t, err, out)
		assert.Equal(t, consumer.Position{Sequence: ck1.seq, HasSub: true}, groupCheckpoints(t, r.URL(), "kcl-live", rs.arn)[shard1])
	})

	t.Run("positions of another stream are refused", func(t *testing.T) {
		// Another stream with records on its shards: its sequence numbers
		// are not records of the target's shards.
		k.MustCreateStream(t, "elsewhere", 2)
		var seqs []string
		for i := range 2 {
			hash := []string{"0", "170141183460469231731687303715884105728"}[i]
			out, err := k.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("elsewhere"),
				PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hash), Data: []byte(fmt.Sprint(i))})
			require.NoError(t, err)
			seqs = append(seqs, *out.SequenceNumber)
		}
		const table = "connect-elsewhere"
		createTable(t, d, table, "StreamID", "ShardID")
		putItems(t, d, table,
			item{"StreamID": strAttr("elsewhere"), "ShardID": strAttr(shard0), "SequenceNumber": strAttr(seqs[0])},
			item{"StreamID": strAttr("elsewhere"), "ShardID": strAttr(shard1), "SequenceNumber": strAttr(seqs[1])},
		)
		out, err := runCLI(t.Context(), importArgs("foreign", SourceConnect, table, "--source-stream", "elsewhere")...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "not records of stream guarded")
		assert.Contains(t, err.Error(), shard1+": "+seqs[1])
		assert.Empty(t, groupCheckpoints(t, r.URL(), "foreign", rs.arn), "nothing written")
	})

	t.Run("moving checkpoints back needs --allow-rewind", func(t *testing.T) {
		const table = "connect-old"
		createTable(t, d, table, "StreamID", "ShardID")
		putItems(t, d, table, item{"StreamID": strAttr("guarded"), "ShardID": strAttr(shard1), "SequenceNumber": strAttr(ck1.seq)})
		out, err := runCLI(t.Context(), importArgs("rewind", SourceConnect, table)...)
		require.NoError(t, err, out)
		// The group reads on past the imported checkpoint.
		later := rs.find(t, shard1, shard1+"-after-5")
		_, err = groupStore(t, r.URL(), "rewind", rs.arn).Reset(t.Context(), nil,
			map[string]consumer.Position{shard0: {ShardEnd: true}, shard1: later.position()}, nil, false)
		require.NoError(t, err)

		out, err = runCLI(t.Context(), importArgs("rewind", SourceConnect, table)...)
		require.Error(t, err, out)
		msg := err.Error()
		assert.Contains(t, msg, shard1+": "+later.seq+" -> "+ck1.seq)
		assert.Contains(t, msg, "records that arrived from")
		assert.Contains(t, msg, "--allow-rewind")
		assert.Equal(t, later.position(), groupCheckpoints(t, r.URL(), "rewind", rs.arn)[shard1], "nothing written")

		out, err = runCLI(t.Context(), importArgs("rewind", SourceConnect, table, "--allow-rewind")...)
		require.NoError(t, err, out)
		assert.Equal(t, ck1.position(), groupCheckpoints(t, r.URL(), "rewind", rs.arn)[shard1])
	})
}
