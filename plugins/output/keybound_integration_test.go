package output

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/producer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// infoRecorder keeps the messages of the INFO records a pipeline logs.
type infoRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *infoRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *infoRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level == slog.LevelInfo {
		r.mu.Lock()
		r.msgs = append(r.msgs, rec.Message)
		r.mu.Unlock()
	}
	return nil
}
func (r *infoRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *infoRecorder) WithGroup(string) slog.Handler      { return r }

func (r *infoRecorder) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

const keyBoundPipeline = `
input:
  generate:
    count: %d
    interval: ""
    mapping: |
      root = "record %%d".format(counter())
      meta key = "user-%%d".format(counter() %% %d)
output:
  kinesis:
    stream: %s
    endpoint: %s
    partition_key: ${! @key }
    batching: { count: 500, period: 20ms }
`

// TestIntegrationKeyBoundInfo checks that an ordered output whose batches
// repeat a key tells the user, once, which setting lifts the ceiling, and
// counts the records that waited for an earlier round trip of their key;
// and that one whose batches hold each key once says nothing.
func TestIntegrationKeyBoundInfo(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesalite(t)
	for _, tc := range []struct {
		name        string
		records     int
		keys        int
		wantInfo    int
		minKeyWaits int64
	}{
		// One key: every record of a batch but its first waits (the
		// batching period may cut the 1,000 into a few more batches).
		{name: "one key", records: 1000, keys: 1, wantInfo: 1, minKeyWaits: 900},
		{name: "1024 keys", records: 3072, keys: 1024, wantInfo: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stream := testenv.StreamName(t)
			emu.MustCreateStream(t, stream, 4)
			rec := &infoRecorder{}
			id := fmt.Sprint(captureRuns.Add(1))
			b := service.NewStreamBuilder()
			require.NoError(t, b.SetYAML(fmt.Sprintf(keyBoundPipeline, tc.records, tc.keys, stream, emu.Endpoint)))
			b.SetLogger(slog.New(rec))
			require.NoError(t, b.SetMetricsYAML("test_capture: { id: \""+id+"\" }"))
			s, err := b.Build()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			require.NoError(t, s.Run(ctx))
			m := takeCaptured(id)

			assert.Equal(t, int64(tc.records), m.Counter(producer.MetricRecords))
			assert.Equal(t, tc.wantInfo, rec.count("bound by repeated partition keys"), "INFO records: %q", rec.msgs)
			if tc.wantInfo > 0 {
				assert.Equal(t, 1, rec.count("aggregation.enabled: true"), "the INFO names the remedy")
			}
			assert.GreaterOrEqual(t, m.Counter(producer.MetricKeyWaited), tc.minKeyWaits)
			t.Logf("%s: %d records waited for an earlier round trip of their key", tc.name, m.Counter(producer.MetricKeyWaited))
		})
	}
}
