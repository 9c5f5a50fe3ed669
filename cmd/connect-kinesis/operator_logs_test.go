package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// TestIntegrationOperatorCausesAreLogged runs the binary on a group whose
// checkpoint of one shard is a sequence number of another stream (what an
// import from the wrong source wrote): the reader says so as an ERROR
// naming the shard and the fix, rather than retrying at warn. Then an
// operator's forced reset fences the running instance, and its log names
// the reset as the cause rather than an expiry.
func TestIntegrationOperatorCausesAreLogged(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream = "operator-logs"
	arn := k.MustCreateStream(t, stream, 1)
	k.MustCreateStream(t, "operator-logs-other", 1)
	// kinesis-mock checks a sequence number only against a shard that holds
	// records.
	_, err := k.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream),
		PartitionKey: aws.String("k"), Data: []byte("y")})
	require.NoError(t, err)
	// The other stream's fifth record: its sequence number cannot be the
	// one record this stream's shard holds (both streams' first records may
	// share a number when written in the same instant).
	var put *kinesis.PutRecordOutput
	for range 5 {
		put, err = k.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String("operator-logs-other"),
			PartitionKey: aws.String("k"), Data: []byte("x")})
		require.NoError(t, err)
	}

	cfg := checkpointer.DefaultConfig()
	cfg.Group = "g" // fileInputConfig's group
	rc := r.Client()
	t.Cleanup(func() { rc.Close() })
	store := checkpointer.NewFromClient(rc, cfg, nil, nil).Stream(arn)
	const shard = "shardId-000000000000"
	// A KCL-style checkpoint (with a sub-sequence) resumes AT_SEQUENCE_NUMBER,
	// which kinesis-mock checks against the shard's records, as AWS checks
	// every sequence number (kinesis-mock accepts an unknown one with
	// AFTER_SEQUENCE_NUMBER).
	_, err = store.Reset(t.Context(), nil, map[string]consumer.Position{shard: {Sequence: *put.SequenceNumber, HasSub: true}}, nil, false)
	require.NoError(t, err)

	dir := t.TempDir()
	conf := writeFile(t, "in.yaml", fileInputConfig(stream, k.Endpoint, r.URL(), filepath.Join(dir, "out.jsonl")))
	startBinary(t, dir, "reader", conf, nil)
	logOf := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "reader.log"))
		return string(b)
	}
	errorLine := func() string {
		for _, l := range strings.Split(logOf(), "\n") {
			if strings.Contains(l, "Shard "+shard+" cannot be read") {
				return l
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return errorLine() != "" }, 60*time.Second, 200*time.Millisecond,
		"the reader names the shard whose checkpoint Kinesis does not know")
	line := errorLine()
	assert.Contains(t, line, "level=error")
	assert.Contains(t, line, "checkpoints reset")

	run(t, "checkpoints", "reset", "--redis-url", r.URL(), "--group", "g", "--stream", stream, "--stream-id", arn,
		"--to", "trim_horizon", "--force", "--yes")
	assert.Eventually(t, func() bool {
		l := logOf()
		return strings.Contains(l, "Lease fenced: the stream's checkpoints were replaced") && strings.Contains(l, "by an operator's `checkpoints reset`")
	}, 60*time.Second, 200*time.Millisecond, "the fenced reader names the operator's reset as a cause")
}
