package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// set assigns value at path in a decoded YAML document, creating maps on
// the way.
func set(doc map[string]any, value any, path ...string) {
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// TestIntegrationCreatedConfigRuns runs what `create kinesis//kinesis`
// prints, with only what a user must fill in filled (streams, the Redis URL,
// the group, where Kinesis is and its credentials), against a plain
// redis-server without replicas: the output writes every record and the
// input commits checkpoints. It guards against an optional field that
// `create` fills with a value changing its unset meaning (an example
// `min_replicas_to_ack: 1` made every commit wait for a replica that a
// plain Redis does not have).
func TestIntegrationCreatedConfigRuns(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	const source, target, group, n = "created-source", "created-target", "created", 40
	sourceARN := k.MustCreateStream(t, source, 2)
	k.MustCreateStream(t, target, 1)

	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(run(t, "create", "kinesis//kinesis")), &doc))
	port, err := testenv.FreePort()
	require.NoError(t, err)
	set(doc, fmt.Sprintf("127.0.0.1:%d", port), "http", "address")
	in := []string{"input", "kinesis"}
	out := []string{"output", "kinesis"}
	set(doc, []any{source}, append(in, "streams")...)
	set(doc, r.URL(), append(in, "checkpoint", "redis", "url")...)
	set(doc, group, append(in, "checkpoint", "group")...)
	set(doc, target, append(out, "stream")...)
	for _, p := range [][]string{in, out} {
		set(doc, testenv.Region, append(p, "region")...)
		set(doc, k.Endpoint, append(p, "endpoint")...)
		set(doc, testenv.AccessKey, append(p, "credentials", "id")...)
		set(doc, testenv.SecretKey, append(p, "credentials", "secret")...)
	}
	conf, err := yaml.Marshal(doc)
	require.NoError(t, err)

	// The records carry the field the created partition_key reads.
	entries := make([]types.PutRecordsRequestEntry, n)
	for i := range entries {
		data, _ := json.Marshal(map[string]any{"user_id": fmt.Sprintf("u%d", i%7), "n": i})
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint(i))}
	}
	client := k.Client()
	put, err := client.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(source), Records: entries})
	require.NoError(t, err)
	require.Zero(t, aws.ToInt32(put.FailedRecordCount))

	cmd, logf := startBinary(t, t.TempDir(), "created", writeFile(t, "created.yaml", string(conf)), nil)

	cfg := checkpointer.DefaultConfig()
	cfg.Group = group
	rc := r.Client()
	t.Cleanup(func() { rc.Close() })
	store := checkpointer.NewFromClient(rc, cfg, nil, nil).Stream(sourceARN)
	assert.Eventually(t, func() bool { return countRecords(t, client, target) == n }, 60*time.Second, 500*time.Millisecond,
		"the output writes all %d records", n)
	assert.Eventually(t, func() bool {
		ck, err := store.Checkpoints(t.Context())
		require.NoError(t, err)
		return len(ck) == 2
	}, 60*time.Second, 200*time.Millisecond, "the input commits a checkpoint on both shards")

	// A commit that waits for a replica the server does not have writes
	// the checkpoint and then fails: the log tells, and the stop's final
	// commit fails the same way.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, cmd.Wait(), "a graceful stop")
	log, err := os.ReadFile(logf.Name())
	require.NoError(t, err)
	assert.NotContains(t, string(log), "replicas acknowledged", "no commit waits for replicas a plain Redis does not have")
	assert.NotContains(t, string(log), "level=error")
}

// countRecords reads a stream from its start and counts its records.
func countRecords(t *testing.T, c *kinesis.Client, stream string) int {
	t.Helper()
	shards, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	total := 0
	for _, s := range shards.Shards {
		it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String(stream),
			ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		require.NoError(t, err)
		iter := it.ShardIterator
		for iter != nil {
			got, err := c.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: iter})
			require.NoError(t, err)
			total += len(got.Records)
			if len(got.Records) == 0 {
				break
			}
			iter = got.NextShardIterator
		}
	}
	return total
}
