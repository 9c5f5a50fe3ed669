package main

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationChaosShort is the short form of `make chaos`: a producer
// process writes keyed, counted records through the output and a fault proxy
// (throttling, 5xx, resets, refused entries, per-shard limits); three input
// processes read them while instances are SIGKILLed and restarted, the
// stream is split twice and merged once, and Redis is restarted and paused
// for longer than the lease period. Nothing may be lost, each key's records
// must first arrive in order, and duplicates must stay within the bound of
// the events that cause them. CHAOS_SEED replays a run.
func TestIntegrationChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes about a minute and a half; skipped with -short")
	}
	seed := uint64(1)
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q is not an unsigned integer", s)
		}
		seed = v
	}
	dir := t.TempDir()
	table, err := chaos.Run(t.Context(), chaos.Config{Binary: binary, Dir: dir, Seed: seed, Short: true, Logf: t.Logf})
	testenv.Require(t, "running the chaos schedule", err)
	t.Logf("chaos table (seed %d):\n%s", seed, table)
	assert.Zero(t, table.InputLost, "stream records never delivered")
	assert.Zero(t, table.OutputLost, "messages the output never wrote")
	assert.Zero(t, table.EndToEndLost, "messages sent but never delivered")
	assert.Zero(t, table.OrderViolations, "per-key order of first deliveries")
	assert.LessOrEqual(t, table.Duplicates, table.DuplicateBound, "duplicates within the design's bound")
	assert.True(t, table.OK())
}
