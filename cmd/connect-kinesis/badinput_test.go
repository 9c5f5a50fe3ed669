package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A bad configuration must stop the binary on its own; this is how long a
// case may take before the test calls it a hang. It is not a speed check.
const badConfigDeadline = 30 * time.Second

// field is one top-level field of a plugin's YAML object, flow style.
type field struct{ key, value string }

// pluginYAML renders fields in order, replacing the values named in set and
// dropping the keys whose value in set is "".
func pluginYAML(base []field, set map[string]string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, f := range base {
		seen[f.key] = true
		v, ok := set[f.key]
		if !ok {
			v = f.value
		}
		if v == "" {
			continue
		}
		fmt.Fprintf(&b, "    %s: %s\n", f.key, v)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !seen[k] && set[k] != "" {
			fmt.Fprintf(&b, "    %s: %s\n", k, set[k])
		}
	}
	return b.String()
}

func badInputConfig(set map[string]string) string {
	base := []field{
		{"streams", "[ orders ]"},
		{"region", testenv.Region},
		{"endpoint", "http://127.0.0.1:1"},
		{"credentials", fmt.Sprintf("{ id: %s, secret: %s }", testenv.AccessKey, testenv.SecretKey)},
		{"checkpoint", "{ redis: { url: 'redis://127.0.0.1:1' }, group: g }"},
	}
	return "http: { enabled: false }\ninput:\n  kinesis:\n" + pluginYAML(base, set) + "output:\n  drop: {}\n"
}

func badOutputConfig(set map[string]string) string {
	base := []field{
		{"stream", "orders"},
		{"partition_key", `'${! counter() }'`},
		{"region", testenv.Region},
		{"endpoint", "http://127.0.0.1:1"},
		{"credentials", fmt.Sprintf("{ id: %s, secret: %s }", testenv.AccessKey, testenv.SecretKey)},
	}
	return "http: { enabled: false }\ninput:\n  generate: { count: 1, interval: '', mapping: 'root = {}' }\noutput:\n  kinesis:\n" + pluginYAML(base, set)
}

// runConfig runs the binary on a config and returns its combined output and
// exit error; it fails the test if the binary is still running at deadline.
func runConfig(t *testing.T, conf string, deadline time.Duration, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, append(args, "-c", path)...).CombinedOutput()
	require.NoError(t, ctx.Err(), "connect-kinesis did not stop on its own within %v:\n%s", deadline, out)
	return string(out), err
}

// TestBadConfigFailsAtStart runs the real binary on every invalid value of
// both plugins: each must exit non-zero at once with an error naming the
// field and what it accepts. `lint` does not type-check plugin fields, so the
// config is run, not linted.
func TestBadConfigFailsAtStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		conf string
		want []string
	}{
		// Benthos' linter rejects enum values before the constructor runs;
		// its message points at the line and quotes the value.
		{"input unknown start_position", badInputConfig(map[string]string{"start_position": "newest"}),
			[]string{"newest is not one of trim_horizon, latest, at_timestamp"}},
		{"input at_timestamp without timestamp", badInputConfig(map[string]string{"start_position": "at_timestamp"}),
			[]string{"start_timestamp", "required", "RFC3339"}},
		{"input timestamp not RFC3339", badInputConfig(map[string]string{"start_position": "at_timestamp", "start_timestamp": "yesterday"}),
			[]string{"start_timestamp", "yesterday", "RFC3339"}},
		{"input timestamp without at_timestamp", badInputConfig(map[string]string{"start_timestamp": "2024-05-01T12:00:00Z"}),
			[]string{"start_timestamp", "at_timestamp"}},
		{"input zero poll_interval", badInputConfig(map[string]string{"poll_interval": "0s"}),
			[]string{"poll_interval", "200ms"}},
		{"input negative poll_interval", badInputConfig(map[string]string{"poll_interval": "-1s"}),
			[]string{"poll_interval", "200ms"}},
		{"input idle below poll", badInputConfig(map[string]string{"idle_poll_interval": "100ms", "poll_interval": "500ms"}),
			[]string{"idle_poll_interval", "poll_interval"}},
		{"input zero discovery interval", badInputConfig(map[string]string{"shard_discovery_interval": "0s"}),
			[]string{"shard_discovery_interval", "positive"}},
		{"input negative lag threshold", badInputConfig(map[string]string{"lag_warn_threshold": "-5s"}),
			[]string{"lag_warn_threshold"}},
		{"input zero commit_period", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://127.0.0.1:1' }, group: g, commit_period: 0s }"}),
			[]string{"commit_period"}},
		{"input negative lease period", badInputConfig(map[string]string{"lease": "{ period: -1s }"}),
			[]string{"lease.period"}},
		{"input zero rebalance period", badInputConfig(map[string]string{"lease": "{ rebalance_period: 0s }"}),
			[]string{"rebalance_period"}},
		{"input zero handoff timeout", badInputConfig(map[string]string{"lease": "{ handoff_timeout: 0s }"}),
			[]string{"handoff_timeout"}},
		{"input empty streams", badInputConfig(map[string]string{"streams": "[]"}),
			[]string{"streams", "at least one"}},
		{"input empty stream name", badInputConfig(map[string]string{"streams": `[ "" ]`}),
			[]string{"streams", "empty"}},
		{"input missing group", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://127.0.0.1:1' } }"}),
			[]string{"group"}},
		{"input empty group", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://127.0.0.1:1' }, group: '' }"}),
			[]string{"checkpoint.group", "required"}},
		{"input redis URL wrong scheme", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'http://127.0.0.1:6379' }, group: g }"}),
			[]string{"checkpoint.redis.url", "redis://"}},
		{"input redis URL unparsable", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://:pw@%zz' }, group: g }"}),
			[]string{"checkpoint.redis", "url"}},
		{"input redis kind unknown", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://127.0.0.1:1', kind: sharded }, group: g }"}),
			[]string{"sharded is not one of simple, cluster, failover"}},
		{"input failover without master", badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://127.0.0.1:1', kind: failover }, group: g }"}),
			[]string{"checkpoint.redis.master", "failover"}},
		{"input shard_max_in_flight zero", badInputConfig(map[string]string{"shard_max_in_flight": "0"}),
			[]string{"shard_max_in_flight", "at least 1"}},
		{"input limit too large", badInputConfig(map[string]string{"limit": "10001"}),
			[]string{"limit", "10000"}},
		{"output empty stream", badOutputConfig(map[string]string{"stream": "''"}),
			[]string{"stream", "empty"}},
		{"output missing partition_key", badOutputConfig(map[string]string{"partition_key": ""}),
			[]string{"partition_key"}},
		{"output max_in_flight zero", badOutputConfig(map[string]string{"max_in_flight": "0"}),
			[]string{"max_in_flight"}},
		{"output max_record_size too large", badOutputConfig(map[string]string{"max_record_size": "20000000"}),
			[]string{"max_record_size", "10485760"}},
		{"output max_record_size zero", badOutputConfig(map[string]string{"max_record_size": "0"}),
			[]string{"max_record_size"}},
		{"output aggregation max_bytes too small", badOutputConfig(map[string]string{"aggregation": "{ enabled: true, max_bytes: 10 }"}),
			[]string{"aggregation.max_bytes", "256"}},
		{"output negative backoff", badOutputConfig(map[string]string{"backoff": "{ initial_interval: -1s }"}),
			[]string{"backoff.initial_interval"}},
		{"output bad partition_key interpolation", badOutputConfig(map[string]string{"partition_key": `'${! json("a" }'`}),
			[]string{"partition_key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runConfig(t, tc.conf, badConfigDeadline)
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "connect-kinesis must exit non-zero, got %v:\n%s", err, out)
			for _, w := range tc.want {
				assert.Contains(t, out, w, "the error must name the field and the fix")
			}
			assert.NotContains(t, out, ":pw@", "a Redis password never reaches the log")
		})
	}
}

// TestIntegrationStreamMissing: a stream that does not exist is reported by
// name and region, and nothing is read or written.
func TestIntegrationStreamMissing(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	creds := fmt.Sprintf("{ id: %s, secret: %s }", testenv.AccessKey, testenv.SecretKey)

	t.Run("input", func(t *testing.T) {
		conf := badInputConfig(map[string]string{
			"streams":    "[ no-such-stream ]",
			"endpoint":   k.Endpoint,
			"checkpoint": fmt.Sprintf("{ redis: { url: '%s' }, group: g }", r.URL()),
		})
		log := runUntilLogged(t, conf, "no-such-stream")
		assert.Contains(t, log, "stream no-such-stream does not exist here: check the streams, region and endpoint fields")
		assert.Contains(t, log, "ResourceNotFoundException", "the error says the stream is not there:\n%s", log)
	})
	t.Run("output", func(t *testing.T) {
		conf := badOutputConfig(map[string]string{"stream": "no-such-stream", "endpoint": k.Endpoint, "credentials": creds})
		log := runUntilLogged(t, conf, "no-such-stream")
		assert.Contains(t, log, "does not exist in region "+testenv.Region)
	})
}

// runUntilLogged starts the binary and returns its log once it mentions
// want (or the process ends), then stops it.
func runUntilLogged(t *testing.T, conf, want string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	logPath := filepath.Join(dir, "log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(binary, "-c", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, testenv.StartCommand("connect-kinesis", cmd))
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	var log string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		log = string(b)
		select {
		case <-done:
			return true
		default:
		}
		return strings.Contains(log, want)
	}, badConfigDeadline, 100*time.Millisecond, "no mention of %q in the log", want)
	require.Contains(t, log, want, "log:\n%s", log)
	return log
}

// fileInputConfig is a kinesis input on stream at endpoint, checkpointing in
// Redis under group g, writing each record as a line to out; fields are more
// input fields, one "key: value" each.
func fileInputConfig(stream, endpoint, redisURL, out string, fields ...string) string {
	var extra strings.Builder
	for _, f := range fields {
		extra.WriteString("    " + f + "\n")
	}
	return fmt.Sprintf(`http: { enabled: false }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint: { redis: { url: '%s' }, group: g, commit_period: 200ms }
%soutput:
  file: { path: %s, codec: lines }
`, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, extra.String(), out)
}

// TestIntegrationRedisDownAtStart: with Redis unreachable the input keeps
// retrying its connection and reads nothing, never guessing a start
// position; once Redis is back it starts from trim_horizon and loses nothing.
func TestIntegrationRedisDownAtStart(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream = "redis-down"
	k.MustCreateStream(t, stream, 2)
	putKeyed(t, k.Client(), stream, 50)
	r.Stop()

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	conf := "logger: { level: debug }\n" + fileInputConfig(stream, k.Endpoint, r.URL(), out)
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	logPath := filepath.Join(dir, "log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(binary, "-c", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, testenv.StartCommand("connect-kinesis", cmd))
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// Two failed connection attempts prove it retries rather than gives up.
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "checkpoint store") >= 2
	}, badConfigDeadline, 100*time.Millisecond, "the input does not say it retries the checkpoint store")
	assert.Empty(t, readLines(t, out), "nothing is read while Redis is down")
	assert.NoError(t, cmd.Process.Signal(syscall.Signal(0)), "the input keeps waiting for Redis rather than exiting")

	require.NoError(t, r.Start(t.Context()))
	require.Eventually(t, func() bool { return len(readLines(t, out)) >= 50 }, 60*time.Second, 100*time.Millisecond,
		"once Redis is back every record is read from trim_horizon")
}

// putKeyed writes n JSON records {"k":..,"c":..} over keys k0..k9.
func putKeyed(t *testing.T, c *kinesis.Client, stream string, n int) {
	t.Helper()
	var entries []types.PutRecordsRequestEntry
	for i := range n {
		k := fmt.Sprintf("k%d", i%10)
		data, _ := json.Marshal(map[string]any{"k": k, "c": i/10 + 1})
		entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(k)})
	}
	out, err := c.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	require.NoError(t, err)
	require.Zero(t, aws.ToInt32(out.FailedRecordCount))
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// TestIntegrationOutputBadRecords: records that can never be written (over
// the size limit, a 257-character key, a hash key out of range) fail alone
// with an error naming why, through a fallback output; every other message
// of the batch lands exactly once.
func TestIntegrationOutputBadRecords(t *testing.T) {
	t.Parallel()
	outputBadRecords(t, map[int]string{3: "too large", 6: "257 characters", 12: "hash key"})
}

// TestIntegrationOutputInvalidUTF8Key: a partition key that is not UTF-8
// cannot be sent as it is (the request is JSON), so it must fail alone rather
// than be rewritten into another key, which would land on another shard and
// merge two keys' records.
func TestIntegrationOutputInvalidUTF8Key(t *testing.T) {
	t.Parallel()
	outputBadRecords(t, map[int]string{9: "UTF-8"})
}

// outputBadRecords writes twenty messages in one batch, of which those in
// bad (n -> expected error text) are made invalid, and checks that exactly
// those fail and every other message lands once.
func outputBadRecords(t *testing.T, bad map[int]string) {
	k := testenv.SharedKinesisMock(t)
	stream := testenv.StreamName(t) // two tests share this helper and the emulator
	k.MustCreateStream(t, stream, 2)
	dir := t.TempDir()
	failed := filepath.Join(dir, "failed.jsonl")
	on := func(n int) int {
		if _, ok := bad[n]; ok {
			return n
		}
		return -1
	}
	conf := fmt.Sprintf(`
http: { enabled: false }
input:
  generate:
    count: 20
    interval: ""
    batch_size: 20
    mapping: |
      let n = counter()
      root = { "n": $n }
      meta pk = "key-" + $n.string()
      meta hk = ""
      root.pad = if $n == %d { range(0, 1048576).map_each(_ -> "x").join("") }
      meta pk = if $n == %d { range(0, 257).map_each(_ -> "p").join("") } else { @pk }
      meta pk = if $n == %d { "bad\xffkey" } else { @pk }
      meta hk = if $n == %d { "340282366920938463463374607431768211456" } else { @hk }
output:
  fallback:
    - kinesis:
        stream: %s
        partition_key: '${! @pk }'
        hash_key: '${! @hk }'
        region: %s
        endpoint: %s
        credentials: { id: %s, secret: %s }
        max_retries: 2
    - file:
        path: %s
        codec: lines
      processors:
        - mapping: 'root = { "n": this.n, "error": @fallback_error }'
`, on(3), on(6), on(9), on(12), stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, failed)
	out, err := runConfig(t, conf, 60*time.Second)
	require.NoError(t, err, out)

	byN := map[int]string{}
	for _, l := range readLines(t, failed) {
		var f struct {
			N     int    `json:"n"`
			Error string `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &f), l)
		byN[f.N] = f.Error
	}
	assert.Len(t, byN, len(bad), "exactly the bad messages fail: %v", byN)
	for n, want := range bad {
		assert.Contains(t, byN[n], want, "message %d fails with a reason", n)
	}

	landed := map[int]int{}
	for _, rec := range readStream(t, k.Client(), stream) {
		var m struct {
			N int `json:"n"`
		}
		require.NoError(t, json.Unmarshal(rec.Data, &m))
		landed[m.N]++
	}
	for n := 1; n <= 20; n++ {
		if _, isBad := bad[n]; isBad {
			assert.Zero(t, landed[n], "bad message %d must not be written", n)
		} else {
			assert.Equal(t, 1, landed[n], "message %d is written exactly once", n)
		}
	}
}

// readStream returns every record of every shard from trim_horizon.
func readStream(t *testing.T, c *kinesis.Client, stream string) []types.Record {
	t.Helper()
	shards, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	var all []types.Record
	for _, s := range shards.Shards {
		it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{
			StreamName: aws.String(stream), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		require.NoError(t, err)
		iter := it.ShardIterator
		for iter != nil {
			out, err := c.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: iter})
			require.NoError(t, err)
			all = append(all, out.Records...)
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return all
}

// TestIntegrationStreamDeletedWhileReading: when the stream is deleted under
// a running input, the input reports it by name and does not crash; what it
// had read stays delivered.
func TestIntegrationStreamDeletedWhileReading(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream = "deleted-later"
	k.MustCreateStream(t, stream, 1)
	putKeyed(t, k.Client(), stream, 20)

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	conf := fileInputConfig(stream, k.Endpoint, r.URL(), out, "idle_poll_interval: 200ms", "shard_discovery_interval: 500ms")
	_, logPath := startLogged(t, dir, conf)
	require.Eventually(t, func() bool { return len(readLines(t, out)) >= 20 }, 60*time.Second, 100*time.Millisecond)

	_, err := k.Client().DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	var log string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		log = string(b)
		return strings.Contains(log, "ResourceNotFound") || strings.Contains(log, "does not exist") || strings.Contains(log, "not found")
	}, badConfigDeadline, 200*time.Millisecond, "the deletion is not reported")
	t.Logf("log after the deletion (tail):\n%s", tail(log, 1200))
	assert.Contains(t, log, stream, "the report names the stream")
	assert.NotContains(t, log, "panic", "no crash")
	assert.Len(t, readLines(t, out), 20, "what was read stays delivered, once")
}
