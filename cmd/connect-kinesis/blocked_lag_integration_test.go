package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards the defect "a shard blocked by a poison record shows no lag",
// with the real binary against kinesis-mock and redis-server: one shard,
// one poison record among good ones, the default redelivery policy (no
// dead letter: the record is retried forever). The shard was read to its
// tip, so kinesis_input_millis_behind_latest stayed 0 while the shard
// waited, and no line named the record. Now the gauge is the poison
// record's age and grows, and one WARN naming the stream, the shard and
// the record comes per minute however often the record fails.
func TestIntegrationBlockedShardShowsLagAndWarnsOncePerMinute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port, err := testenv.FreePort()
	require.NoError(t, err)
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	stream := testenv.StreamName(t)
	k.MustCreateStream(t, stream, 1)

	// The good records share the poison record's batch, so the output
	// singles it out (the others are written): its failures are its own.
	entries := []types.PutRecordsRequestEntry{}
	for i := range 5 {
		entries = append(entries, types.PutRecordsRequestEntry{Data: fmt.Appendf(nil, `{"n":%d}`, i), PartitionKey: aws.String("k")})
	}
	entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(`{"poison":true}`), PartitionKey: aws.String("k")})
	for i := 5; i < 10; i++ {
		entries = append(entries, types.PutRecordsRequestEntry{Data: fmt.Appendf(nil, `{"n":%d}`, i), PartitionKey: aws.String("k")})
	}
	out, err := k.Client().PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	require.NoError(t, err)
	require.Zero(t, aws.ToInt32(out.FailedRecordCount))
	written := time.Now()
	shard, seq := aws.ToString(out.Records[5].ShardId), aws.ToString(out.Records[5].SequenceNumber)

	conf := filepath.Join(dir, "reader.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(blockedInstanceYAML, port, stream, testenv.Region, k.Endpoint,
		testenv.AccessKey, testenv.SecretKey, r.URL(), filepath.Join(dir, "delivered.txt"))), 0o600))
	_, logf := startBinary(t, dir, "reader", conf, nil)

	// The gauge is the poison record's age, and grows while the shard waits.
	behindRe := regexp.MustCompile(`(?m)^kinesis_input_millis_behind_latest\{[^}]*shard="` + regexp.QuoteMeta(shard) + `"[^}]*\} (\S+)$`)
	redeliveredRe := regexp.MustCompile(`(?m)^kinesis_input_redelivered_total\{[^}]*shard="` + regexp.QuoteMeta(shard) + `"[^}]*\} (\S+)$`)
	var first float64
	var firstAt time.Time
	require.Eventually(t, func() bool {
		first, firstAt = scrapeValue(t, port, behindRe), time.Now()
		return first > 0
	}, 30*time.Second, 500*time.Millisecond, "kinesis_input_millis_behind_latest of the blocked shard rises above 0")
	time.Sleep(5 * time.Second)
	second, secondAt := scrapeValue(t, port, behindRe), time.Now()
	t.Logf("kinesis_input_millis_behind_latest of the blocked shard: %.0f ms at %v after the write, %.0f ms at %v",
		first, firstAt.Sub(written).Round(time.Millisecond), second, secondAt.Sub(written).Round(time.Millisecond))
	assert.InDelta(t, float64(firstAt.Sub(written).Milliseconds()), first, 3000, "the gauge is the age of the record the shard waits for")
	assert.GreaterOrEqual(t, second-first, 4000.0, "the gauge grows while the shard waits")

	// One WARN in the first minute however often the record fails, and one
	// again after it.
	warnRe := regexp.MustCompile(`(?m)^.*level=warn.*Record ` + regexp.QuoteMeta(seq) + ` of stream ` + regexp.QuoteMeta(stream) + `, shard ` + regexp.QuoteMeta(shard) + ` has failed.*$`)
	var warns []string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(logf.Name())
		require.NoError(t, err)
		warns = warnRe.FindAllString(string(b), -1)
		return len(warns) >= 2
	}, 100*time.Second, time.Second, "a second WARN a minute after the first")
	times := make([]time.Time, len(warns))
	for i, w := range warns {
		m := regexp.MustCompile(`time="?([^" ]+)`).FindStringSubmatch(w)
		require.NotNil(t, m, "a timestamp on %q", w)
		times[i], err = time.Parse(time.RFC3339, m[1])
		require.NoError(t, err)
	}
	redelivered := scrapeValue(t, port, redeliveredRe)
	t.Logf("%d WARNs, %v apart, while the record was delivered again %.0f times; the first: %s", len(warns), times[1].Sub(times[0]), redelivered, warns[0])
	assert.Len(t, warns, 2, "one WARN per minute window")
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 59*time.Second, "not two in one minute")
	assert.Greater(t, redelivered, 10.0, "the record failed far more often than it was warned about")
	assert.Contains(t, warns[0], "redelivery.dead_letter", "the WARN says how to move such records aside")
}

// scrapeValue is the value of the first series re matches on the binary's
// /metrics at port (0 while none does).
func scrapeValue(t *testing.T, port int, re *regexp.Regexp) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := re.FindStringSubmatch(string(b))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(m[1]), 64)
	require.NoError(t, err)
	return v
}
