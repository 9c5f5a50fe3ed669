package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// outageYAML is config/examples/input_dead_letter.yaml's pipeline with an
// http_client output behind reject_errored: the mapping throws for a
// poison record, and the dead letter writes each record's data as a line.
const outageYAML = `
logger: { level: info, format: logfmt }
http: { enabled: false }
input:
  kinesis:
    streams: [ %s ]
    start_position: trim_horizon
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: %s }
      group: outage
      commit_period: 500ms
    redelivery:
      max_attempts: 3
      dead_letter: dead_letter
pipeline:
  processors:
    - mapping: |
        root = if this.poison.or(false) { throw("this record can never be processed") } else { this }
output:
  reject_errored:
    http_client:
      url: %s
      verb: POST
      retries: 1
      retry_period: 100ms
output_resources:
  - label: dead_letter
    file: { path: %s, codec: lines }
shutdown_timeout: 5s
`

// outageSink is an HTTP sink that answers 503 for down from its first
// request, then takes every message.
type outageSink struct {
	down    time.Duration
	mu      sync.Mutex
	first   time.Time
	refused int
	took    map[string]int
}

func (s *outageSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first.IsZero() {
		s.first = time.Now()
	}
	if time.Since(s.first) < s.down {
		s.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.took[string(body)]++
}

func (s *outageSink) state() (took map[string]int, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	took = make(map[string]int, len(s.took))
	for k, v := range s.took {
		took[k] = v
	}
	return took, s.refused
}

// Guards issue 59 item 5 and issue 60 item 2 end to end: the shipped dead
// letter pipeline (reject_errored, max_attempts: 3) in front of an HTTP
// sink that answers 503 for 30 s dead-lettered good records (99 of 198 in
// the run). Nothing but the two poison records may reach the dead
// letter; every good record reaches the sink once the outage is over.
func TestIntegrationOutputDownDeadLettersNoGoodRecord(t *testing.T) {
	t.Parallel()
	const good, down = 198, 30 * time.Second
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	stream := testenv.StreamName(t)
	k.MustCreateStream(t, stream, 2)
	var entries []types.PutRecordsRequestEntry
	for i := range good + 2 {
		data := fmt.Sprintf(`{"n":%d}`, i)
		if i == 50 || i == 150 {
			data = fmt.Sprintf(`{"n":%d,"poison":true}`, i)
		}
		entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(data), PartitionKey: aws.String(fmt.Sprintf("k%d", i%20))})
	}
	out, err := k.Client().PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	require.NoError(t, err)
	require.Zero(t, aws.ToInt32(out.FailedRecordCount))

	sink := &outageSink{down: down, took: map[string]int{}}
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	dlq := filepath.Join(dir, "dead-letter.jsonl")
	conf := filepath.Join(dir, "outage.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(outageYAML, stream, testenv.Region, k.Endpoint,
		testenv.AccessKey, testenv.SecretKey, r.URL(), srv.URL, dlq)), 0o600))
	startBinary(t, dir, "reader", conf, nil)

	var took map[string]int
	var refused int
	require.Eventually(t, func() bool {
		took, refused = sink.state()
		return len(took) == good && len(readLines(t, dlq)) >= 2
	}, down+90*time.Second, 500*time.Millisecond, "every good record reaches the sink once it is back")
	var poison, goodDead int
	for _, l := range readLines(t, dlq) {
		var rec struct {
			Poison bool `json:"poison"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "dead letter line %q", l)
		if rec.Poison {
			poison++
		} else {
			goodDead++
		}
	}
	t.Logf("the sink refused %d requests in its %v outage, then took %d good records; dead letter: %d poison, %d good",
		refused, down, len(took), poison, goodDead)
	assert.Zero(t, goodDead, "no good record is dead-lettered during the outage")
	assert.Equal(t, 2, poison, "the poison records are dead-lettered once each")
	for body, n := range took {
		assert.Equal(t, 1, n, "%s written once", body)
	}
}
