package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// TestSoakBigKeepsUpUnderTheSmallBudget: with the budget class, soak-big's
// reader, once behind, reads its records faster than its producer writes
// them, on the loaded machine the soak runs on. A shard behind asks Kinesis
// for as many records as half the budget holds while they are read, and
// with shard_max_in_flight 1 it reads one answer per round trip (fetch,
// pipeline, ack). Under the 512 KiB budget of the long runs that was one
// 96 KiB record a round trip; round trips of 0.3 to 1.9 s at load 10 to 16
// (seed 2, budget,kpl,kill,pause) read 0.4 to 0.9 records/s against the 2
// written, and soak-big fell minutes behind in every long run. Not a
// timing test: it checks the arithmetic of the budget on soak-big's records
// against a round trip of 2 s.
func TestSoakBigKeepsUpUnderTheSmallBudget(t *testing.T) {
	const (
		loadedRoundTrip = 2 * time.Second
		margin          = 1.5 // to catch up after a fault, not only to hold
	)
	st := soakBig(time.Hour, false)
	written := float64(st.keys) / st.every.Seconds()
	perCall := behindCallLimit(t, smallBudgetBytes, st)
	read := float64(perCall) / loadedRoundTrip.Seconds()
	assert.GreaterOrEqualf(t, read, margin*written,
		"under max_buffered_bytes %d a reader behind on %s reads %d of its records per call, %.1f/s at a %v round trip; its producer writes %.1f/s",
		smallBudgetBytes, st.name, perCall, read, loadedRoundTrip, written)
}

// behindCallLimit is the Limit of a GetRecords of a shard of st that is
// behind the tip, under a budget of capacity bytes, once it has seen one of
// its records, with that answer still in the pipeline.
func behindCallLimit(t *testing.T, capacity int, st *soakStream) int32 {
	t.Helper()
	b := budget.New(int64(capacity), consumer.NewMetrics(nil))
	s := budget.NewShard(b, kinesisx.MaxGetRecordsLimit, false, nil, st.name)
	require.NoError(t, s.Reserve(t.Context()))
	rec := soakRecord(t, st)
	s.Settle([]consumer.Record{rec}, []types.Record{{Data: rec.Data}}, time.Minute.Milliseconds())
	require.NoError(t, s.Reserve(t.Context()))
	return s.CallLimit()
}

// soakRecord is a record of st as its producer writes it (producerConfig).
func soakRecord(t *testing.T, st *soakStream) consumer.Record {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"k": strings.TrimPrefix(st.name, "soak-") + "-k0", "c": 100000, "poison": false,
		"pad": strings.Repeat("0123456789abcdef", 4*16*st.padKiB),
	})
	require.NoError(t, err)
	return consumer.Record{Data: data, PartitionKey: "big-k0", Sequence: strings.Repeat("4", 56)}
}

// TestSoakBigWithEFOStaysWithinOneEventOfKinesisMock: with the efo class a
// long run's soak-big holds at most efoBigBytes in all, the most a fan-out
// reader at trim_horizon may ask kinesis-mock to put in one event; its
// records stay 96 KiB and a run short enough keeps the full pace. Without efo the pace is the full one at any length.
func TestSoakBigWithEFOStaysWithinOneEventOfKinesisMock(t *testing.T) {
	written := func(st *soakStream, d time.Duration) float64 {
		return d.Seconds() / st.every.Seconds() * float64(st.keys*st.padKiB<<10)
	}
	for _, d := range []time.Duration{3 * time.Minute, 10 * time.Minute, time.Hour, 4 * time.Hour} {
		st := soakBig(d, true)
		assert.LessOrEqualf(t, written(st, d), float64(efoBigBytes), "%v with efo: one record per key every %v", d, st.every)
		assert.Equal(t, 96, st.padKiB, "%v with efo: the records stay large", d)
		assert.Equal(t, time.Second, soakBig(d, false).every, "%v without efo: the full pace", d)
	}
	assert.Equal(t, time.Second, soakBig(2*time.Minute, true).every, "a run short enough keeps the full pace")
	assert.Equal(t, 22*time.Second, soakBig(time.Hour, true).every, "an hour with efo: one record per key every 22 s")
}

// The report's load line says each stream's pace, so that a run with efo
// says that soak-big wrote more slowly.
func TestSoakLoadLineSaysEachStreamsPace(t *testing.T) {
	got := loadLine([]*soakStream{
		{name: "soak-a", keys: 6, every: 250 * time.Millisecond},
		{name: "soak-kpl", keys: 6, every: 250 * time.Millisecond, aggregation: true},
		soakBig(time.Hour, true),
	})
	assert.Equal(t, "soak-a (6 keys, one record per key every 250ms), soak-kpl (6 keys, one record per key every 250ms, KPL aggregates), soak-big (2 keys, one record per key every 22s, 96 KiB records)", got)
}
