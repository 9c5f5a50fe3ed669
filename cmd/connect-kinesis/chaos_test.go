package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationChaosShort is the short form of `make chaos`: a producer
// process writes keyed, counted records through the output and a fault proxy
// (throttling, 5xx, resets, refused entries, per-shard limits); three input
// processes read them while instances are SIGKILLed and restarted, the
// stream is split twice and merged once, and Redis is restarted and paused
// for longer than the lease period. Nothing may be lost, each key's records
// must first arrive in order, duplicates must stay within the bound of
// the events that cause them, and each must carry kinesis_redelivered: true.
// It runs in phases: with a Redis that keeps its data (AOF), `trim_horizon`
// and `shard_parallelism: 4`; with a Redis that comes back empty and
// `latest`; with Redis stalls; with standbys (more instances than shards)
// and a Redis that comes back empty; with a holder paused while Redis
// restarts empty and a newcomer starts; with a denied shard; with that
// paused holder alone, its shard split, waking once the newcomer closed the
// parent (its won-back keys may come out of order); and with the output
// down 30 s, where no good record may be dead-lettered. CHAOS_SEED replays
// a run.
func TestIntegrationChaosShort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("chaos takes about three minutes; skipped with -short")
	}
	seed := uint64(1)
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q is not an unsigned integer", s)
		}
		seed = v
	}
	// As in `make chaos`, the first phase reads each shard in four lanes,
	// the denied-shard phase under a byte budget so small that shards take turns.
	for _, phase := range []struct {
		name                         string
		emptyRedis, stalls, standbys bool
		lanes                        int
		budget                       string
		pausedHolder, closesParent   bool
		outputDown                   time.Duration
	}{
		{"redis keeps its data with shard_parallelism 4", false, false, false, 4, "", false, false, 0},
		{"redis down past the lease comes back empty with latest", true, false, false, 1, "", false, false, 0},
		{"redis stalls 2s three times with max_buffered_bytes 64KiB", false, true, false, 1, "64KiB", false, false, 0},
		{"standbys while redis comes back empty with latest", true, false, true, 1, "", false, false, 0},
		{splitBatchingPhase, false, false, false, 1, "", false, false, 0},
		{"a holder paused while redis restarts empty, with a newcomer, with latest", true, false, false, 1, "", true, false, 0},
		// A second stream of one shard whose every GetShardIterator is
		// denied, read with the first under a small budget (issue 33).
		{"denied shard with max_buffered_bytes 256KiB", false, false, false, 1, "256KiB", false, false, 0},
		// Issue 59, item 2: the holder's shard is split in the pause; it
		// wakes once another instance read that parent from `latest` and
		// closed it, and must still read what only it knew.
		{"a paused holder's parent closed by a newcomer under latest", true, false, false, 1, "", true, true, 0},
		// Issue 59, item 5: every failure of the outage is the output's,
		// none a record's own; no good record may be dead-lettered.
		{"output down 30s with max_attempts 3", false, false, false, 1, "", false, false, 30 * time.Second},
	} {
		t.Run(phase.name, func(t *testing.T) {
			t.Parallel() // each phase starts its own emulator, Redis and binaries
			dir := t.TempDir()
			keepFailedChaosDir(t, dir)
			var started startedPIDs
			table, err := chaos.Run(t.Context(), chaos.Config{Binary: binary, Dir: dir, Seed: seed, Short: true, EmptyRedis: phase.emptyRedis, RedisStalls: phase.stalls,
				Standbys: phase.standbys, ShardParallelism: phase.lanes, MaxBufferedBytes: phase.budget, SplitBatching: phase.name == splitBatchingPhase, PausedHolder: phase.pausedHolder, ClosesParent: phase.closesParent, OutputDown: phase.outputDown, Logf: t.Logf,
				DeniedShard: strings.HasPrefix(phase.name, "denied shard"), Started: func(pid int) { started.add(pid) }})
			started.assertGone(t)
			testenv.Require(t, "running the chaos schedule", err)
			t.Logf("chaos table (seed %d, %s):\n%s", seed, phase.name, table)
			assert.Zero(t, table.InputLost, "stream records never delivered")
			assert.Zero(t, table.OutputLost, "messages the output never wrote")
			assert.Zero(t, table.EndToEndLost, "messages sent but never delivered")
			assert.Zero(t, table.OrderViolations, "per-key order of first deliveries")
			assert.Zero(t, table.WindowBreaches, "each fault window's duplicates within its own bound")
			assert.Zero(t, table.DeadLetteredGood, "good records given up to the dead letter")
			assert.Zero(t, table.UnmarkedDups, "deliveries of a record delivered before without kinesis_redelivered: true")
			assert.Empty(t, table.ACLRefusals, "Redis refused the inputs, which run as the shipped ACL input user")
			assert.True(t, table.OK())
		})
	}
}

// TestIntegrationInputRecoversFromHungGetRecords: a GetRecords whose answer
// never comes (a half-open connection) must not stall its shard: the call
// times out and the reader carries on. The proxy holds the hung call for 10
// minutes, so only the client's own timeout can end it.
func TestIntegrationInputRecoversFromHungGetRecords(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream = "hung"
	k.MustCreateStream(t, stream, 1)
	f, err := faultproxy.StartFront(k.Endpoint, "127.0.0.1:0", 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	f.SetReadFaults(faultproxy.ReadFaults{HangRate: 1, HangMax: 10 * time.Minute})

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	conf := fileInputConfig(stream, f.URL, r.URL(), out)
	startLogged(t, dir, conf)
	require.Eventually(t, func() bool { return f.FrontStats().Hangs >= 1 }, 30*time.Second, 50*time.Millisecond, "no GetRecords reached the proxy")
	f.SetReadFaults(faultproxy.ReadFaults{})
	putKeyed(t, k.Client(), stream, 10)
	require.Eventually(t, func() bool { return len(readLines(t, out)) >= 10 }, 90*time.Second, 200*time.Millisecond,
		"the shard stalled behind one hung GetRecords")
}

// splitBatchingPhase writes through an output batching policy with a
// splitting processor, with records that fail validation among valid ones
// of the same keys (chaos.Config.SplitBatching).
const splitBatchingPhase = "output split batching with invalid records"

// keepFailedChaosDir copies a failing phase's directory (configs, the
// instances' logs, the delivery files) into CHAOS_KEEP_DIR when that is
// set, since t.TempDir is removed when the test ends and a flaky phase's
// failure can only be read from its files.
func keepFailedChaosDir(t *testing.T, dir string) {
	keep := os.Getenv("CHAOS_KEEP_DIR")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		to, err := os.MkdirTemp(keep, "phase-")
		if err == nil {
			err = exec.Command("cp", "-a", dir+"/.", to).Run()
		}
		if err != nil {
			t.Logf("keeping the failed phase's files: %v", err)
			return
		}
		t.Logf("the failed phase's files are kept in %s", to)
	})
}
