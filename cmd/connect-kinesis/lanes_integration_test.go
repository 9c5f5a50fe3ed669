package main

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// laneCount is the shard_parallelism of the lanes test: with 30 keys, each
// lane carries several keys and the lanes of a shard run side by side.
const laneCount = 4

// startLaneInstance starts the binary reading with shard_parallelism.
func startLaneInstance(t *testing.T, dir, name string, k *testenv.Kinesis, r *testenv.Redis, stream string) *instance {
	t.Helper()
	out := filepath.Join(dir, name+".jsonl")
	conf := filepath.Join(dir, name+".yaml")
	extra := fmt.Sprintf("    shard_parallelism: %d\n", laneCount)
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(instanceYAML,
		stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL(), miGroup, miCommitPeriod,
		miLeasePeriod, miRebalancePeriod, miShardMaxInFlight, miLimit, extra, name, out)), 0o600))
	cmd, logf := startBinary(t, dir, name, conf, nil)
	return &instance{name: name, cmd: cmd, out: out, log: logf}
}

// TestIntegrationLanesKeepKeyOrderAcrossSIGKILLAndSplit reads a stream
// with shard_parallelism above 1 in two processes, SIGKILLs one while
// records arrive, then splits a shard: every record is delivered, and the
// first deliveries of every key are in the order it was written.
func TestIntegrationLanesKeepKeyOrderAcrossSIGKILLAndSplit(t *testing.T) {
	t.Parallel()
	const stream = "lanes"
	k, r, store, dir := miSetup(t, stream, 2)
	client := k.Client()
	p := &producer{counter: map[string]int{}}
	p.put(t, client, stream, 600)

	insts := []*instance{
		startLaneInstance(t, dir, "a", k, r, stream),
		startLaneInstance(t, dir, "b", k, r, stream),
	}
	require.Eventually(t, func() bool {
		o := owners(t, store)
		return len(o) == 2 && allEqual(o, 1)
	}, 30*time.Second, 100*time.Millisecond, "shards not balanced 1/1: %v", func() string { return ownerSummary(owners(t, store)) })
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 60*time.Second, 200*time.Millisecond, "first 600 records not all delivered")

	// b dies while records arrive; a takes its shard over after its lease.
	p.put(t, client, stream, 300)
	require.NoError(t, insts[1].cmd.Process.Signal(syscall.SIGKILL))
	_ = insts[1].cmd.Wait()
	p.put(t, client, stream, 300)

	// A split: the children are read only after the parent is read to its
	// end, acked and committed.
	parent, mid := splitPoint(t, client, stream)
	_, err := client.SplitShard(t.Context(), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: aws.String(parent), NewStartingHashKey: aws.String(mid.String()),
	})
	require.NoError(t, err)
	_, err = k.WaitActive(t.Context(), stream)
	require.NoError(t, err)
	p.put(t, client, stream, 600)

	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, insts))
		return u == p.total()
	}, 90*time.Second, 200*time.Millisecond, "records after the SIGKILL and the split not all delivered")
	unique, dups, violations := check(deliveries(t, insts))
	t.Logf("written %d, delivered unique %d, duplicates %d (the crash), per-key order violations %d", p.total(), unique, dups, violations)
	assert.Equal(t, p.total(), unique, "nothing lost")
	assert.Zero(t, violations, "per-key order of first deliveries")
}

// splitPoint is an open shard of stream and the middle of its hash range.
func splitPoint(t *testing.T, c *kinesis.Client, stream string) (string, *big.Int) {
	t.Helper()
	out, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	for _, s := range out.Shards {
		if s.SequenceNumberRange.EndingSequenceNumber != nil {
			continue
		}
		lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		return aws.ToString(s.ShardId), new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	}
	t.Fatal("no open shard")
	return "", nil
}
