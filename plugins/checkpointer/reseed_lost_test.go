package checkpointer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// threeRecords makes three group records on one Redis, wiped between them
// (kept, then middle, then newcomer, each with a later start), and returns
// the three stores and the Redis client's flush.
func threeRecords(t *testing.T) (kept, middle, newcomer *Store, flush func()) {
	t.Helper()
	stores, red := forgetStores(t, 3, 30*time.Second)
	c := red.Client()
	t.Cleanup(func() { _ = c.Close() })
	return stores[0], stores[1], stores[2], func() {
		time.Sleep(5 * time.Millisecond) // a later start for the next record
		require.NoError(t, c.FlushAll(t.Context()).Err())
	}
}

// TestIntegrationLostRecordReseedOfANewcomersCloseSkipsNothing guards a
// re-seed whose record lost, of a shard its reader still reads, that a
// newcomer closed from its own later start: the close stands, the lease is
// answered done (neither renewed nor lost), and when no holder of the kept
// record claims the shard the records between the reader's position and
// the newcomer's start are never read.
func TestIntegrationLostRecordReseedOfANewcomersCloseSkipsNothing(t *testing.T) {
	t.Parallel()
	kept, middle, newcomer, flush := threeRecords(t)
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)

	flush()
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "shard", "middle")
	require.NoError(t, err)
	require.NoError(t, middle.Commit(ctx, mid.Lease, consumer.Position{Sequence: "200"}))

	flush()
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)
	require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))
	require.NoError(t, newcomer.CloseShard(ctx, took.Lease))

	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "200"}}, Leases: []consumer.Lease{mid.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	t.Logf("renewed %v lost %v", renewedShards(res), res.Lost)
	closed, err := kept.ClosedShards(ctx)
	require.NoError(t, err)
	cps, err := kept.Checkpoints(ctx)
	require.NoError(t, err)
	assert.False(t, closed["shard"] && cps["shard"].String() == "SHARD_END",
		"the shard stays closed at the newcomer's end though the middle reader delivered only up to 200: %v", cps["shard"])
}

// TestIntegrationLostRecordReseedLeavesUnknownShardTakeable checks the
// liveness of a shard a re-seed whose record lost gave up: once the re-seed
// hold has passed, the losing instance (the only live one) takes it again,
// with no checkpoint and the kept record's earlier start, so it re-reads.
func TestIntegrationLostRecordReseedLeavesUnknownShardTakeable(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 300*time.Millisecond)
	kept, middle := stores[0], stores[1]
	c := red.Client()
	defer c.Close()
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)
	keptStart := keptHeld.GroupStart
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "unknown", "middle")
	require.NoError(t, err)
	require.NoError(t, middle.Commit(ctx, mid.Lease, consumer.Position{Sequence: "700"}))
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle",
		Checkpoints: map[string]consumer.Position{"unknown": {Sequence: "700"}}, Leases: []consumer.Lease{mid.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	require.Equal(t, []string{"unknown"}, res.Lost)
	var took consumer.Take
	require.Eventually(t, func() bool {
		took, err = middle.Acquire(ctx, "unknown", "middle")
		return err == nil && took.Token > 0 && took.Owner == "middle"
	}, 10*time.Second, 50*time.Millisecond, "the given-up shard is never taken again: %v", err)
	assert.True(t, took.Checkpoint.IsZero(), "position %v", took.Checkpoint)
	assert.Equal(t, keptStart.UnixMilli(), took.GroupStart.UnixMilli(), "reads from the kept record's start")
}

// TestIntegrationLostRecordReseedWritesNoCloseIntoUnknownShard guards a
// re-seed whose record lost writing a close into a shard the store does not
// know: its reader read the shard from its own, later `latest` start, so the
// close passes the records between the kept record's start and that one,
// which no holder of the kept record read; as for a position, whoever takes
// the shard should read it from the kept record's start.
func TestIntegrationLostRecordReseedWritesNoCloseIntoUnknownShard(t *testing.T) {
	t.Parallel()
	kept, middle, _, flush := threeRecords(t)
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)
	flush()
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, middle.CloseShard(ctx, mustAcquire(t, middle, "shard")))
	flush()
	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle", Checkpoints: map[string]consumer.Position{}, Closed: []string{"shard"}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	closed, err := kept.ClosedShards(ctx)
	require.NoError(t, err)
	assert.False(t, closed["shard"], "a re-seed whose record lost closed a shard the store did not know")
}

// TestIntegrationLostRecordReseedDoesNotMoveBackTheKeptPosition guards a
// re-seed whose record lost writing its earlier position backwards over a
// position a holder of the kept record re-seeded into a provisional shard:
// the checkpoint moves back and the kept record's reads are delivered again.
func TestIntegrationLostRecordReseedDoesNotMoveBackTheKeptPosition(t *testing.T) {
	t.Parallel()
	kept, middle, newcomer, flush := threeRecords(t)
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)

	flush()
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "shard", "middle")
	require.NoError(t, err)
	require.NoError(t, middle.Commit(ctx, mid.Lease, consumer.Position{Sequence: "200"}))

	flush()
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	_, err = newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)

	// The kept record's holder knows a committed position of the shard it
	// no longer reads (released before the wipes): it writes it back.
	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	cps, err := kept.Checkpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, consumer.Position{Sequence: "500"}, cps["shard"])

	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "200"}}, Leases: []consumer.Lease{mid.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	cps, err = kept.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, consumer.Position{Sequence: "500"}, cps["shard"],
		"a re-seed whose record lost moved back a position the kept record's holder wrote")
}

// TestIntegrationKeptReseedOfAPositionLeavesAPausedKeptHolderItsClaim guards
// a kept record's checkpoint-only seed settling a provisional shard's lease
// as well as its position: a holder of the same record paused with the
// shard's lease (taken after the seeding holder's commit, so ahead of it)
// then finds its lease taken by the newcomer instead of being sent to
// re-seed, and the records between its position and the newcomer's start
// are never read.
func TestIntegrationKeptReseedOfAPositionLeavesAPausedKeptHolderItsClaim(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 30*time.Second)
	seeder, paused, newcomer := stores[0], stores[1], stores[2]
	c := red.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	_, err := seeder.Join(ctx)
	require.NoError(t, err)
	_, err = paused.Join(ctx)
	require.NoError(t, err)
	first, err := seeder.Acquire(ctx, "shard", "seeder")
	require.NoError(t, err)
	require.NoError(t, seeder.Commit(ctx, first.Lease, consumer.Position{Sequence: "500"}))
	require.NoError(t, seeder.Release(ctx, first.Lease))
	held, err := paused.Acquire(ctx, "shard", "paused")
	require.NoError(t, err)
	require.Equal(t, "paused", held.Owner)
	require.NoError(t, paused.Commit(ctx, held.Lease, consumer.Position{Sequence: "700"}))

	time.Sleep(5 * time.Millisecond) // a later start for the newcomer's record
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	_, err = newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)

	_, err = seeder.Reseed(ctx, consumer.Seed{Owner: "seeder",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}})
	require.NoError(t, err)

	_, lost, err := paused.RenewAll(ctx, "paused", []consumer.Lease{held.Lease})
	require.ErrorIs(t, err, consumer.ErrStoreForgot,
		"the paused holder of the kept record is not sent to re-seed (lost %v)", lost)
	res, err := paused.Reseed(ctx, consumer.Seed{Owner: "paused",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "700"}}, Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	require.False(t, res.RecordLost)
	require.Len(t, res.Renewed, 1, "lost %v", res.Lost)
	cps, err := paused.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, consumer.Position{Sequence: "700"}, cps["shard"])
}

// TestIntegrationLostRecordReseedClosesNoSettledShard guards a re-seed whose
// record lost writing its close (SHARD_END) over a position a holder of the
// kept record wrote back into a provisional shard (settled): the close
// passes the records between that position and the losing reader's own,
// later `latest` start, which no holder of the kept record read, and the
// shard is never read again.
func TestIntegrationLostRecordReseedClosesNoSettledShard(t *testing.T) {
	t.Parallel()
	kept, middle, newcomer, flush := threeRecords(t)
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)

	// The middle record's reader reads the shard from its own start to its
	// end and closes it.
	flush()
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, middle.CloseShard(ctx, mustAcquire(t, middle, "shard")))

	flush()
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	_, err = newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)

	// The kept record's holder writes back a committed position of the
	// shard (settled).
	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)

	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle", Checkpoints: map[string]consumer.Position{}, Closed: []string{"shard"}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	closed, err := kept.ClosedShards(ctx)
	require.NoError(t, err)
	cps, err := kept.Checkpoints(ctx)
	require.NoError(t, err)
	assert.False(t, closed["shard"], "a re-seed whose record lost closed a shard the kept record's holder settled at %v", cps["shard"])
	assert.Equal(t, consumer.Position{Sequence: "500"}, cps["shard"],
		"a re-seed whose record lost wrote its close over the kept record's position")
}

// TestIntegrationLostRecordReseedKeepsNoLeaseOverAKeptPosition guards a
// re-seed whose record lost keeping its lease of a shard whose only state
// is the position a holder of the kept record wrote back: its reader reads
// on from its own, later `latest` start and commits past the records
// between that position and its start, which a paused holder of the kept
// record (taken from that position) had not delivered; once the losing
// reader's lease and the re-seed hold ran out, the next take reads from
// the losing reader's commit while the paused holder is still away.
func TestIntegrationLostRecordReseedKeepsNoLeaseOverAKeptPosition(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 300*time.Millisecond)
	seeder, paused, middle := stores[0], stores[1], stores[2]
	c := red.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	_, err := seeder.Join(ctx)
	require.NoError(t, err)
	_, err = paused.Join(ctx)
	require.NoError(t, err)
	first, err := seeder.Acquire(ctx, "shard", "seeder")
	require.NoError(t, err)
	require.NoError(t, seeder.Commit(ctx, first.Lease, consumer.Position{Sequence: "500"}))
	require.NoError(t, seeder.Release(ctx, first.Lease))
	// The paused holder takes the shard from 500, delivers a little past it
	// and pauses.
	held, err := paused.Acquire(ctx, "shard", "paused")
	require.NoError(t, err)
	require.Equal(t, "paused", held.Owner)

	time.Sleep(5 * time.Millisecond) // a later start for the middle record
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "shard", "middle")
	require.NoError(t, err)
	require.Equal(t, "middle", mid.Owner)
	require.NoError(t, middle.Commit(ctx, mid.Lease, consumer.Position{Sequence: "900"}))

	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = seeder.Reseed(ctx, consumer.Seed{Owner: "seeder",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "900"}}, Leases: []consumer.Lease{mid.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	if len(res.Renewed) == 1 {
		// The losing reader reads on and commits, then is cut off.
		require.NoError(t, middle.Commit(ctx, res.Renewed[0], consumer.Position{Sequence: "1000"}))
	}
	var took consumer.Take
	require.Eventually(t, func() bool {
		took, err = seeder.Acquire(ctx, "shard", "seeder")
		return err == nil && took.Owner == "seeder"
	}, 10*time.Second, 50*time.Millisecond, "the shard is never taken again: %v", err)
	assert.Equal(t, consumer.Position{Sequence: "500"}, took.Checkpoint,
		"the next take passes the paused kept holder's position (renewed %v, lost %v)", renewedShards(res), res.Lost)
}

// TestIntegrationLostRecordReseedOfANewcomersReleaseSkipsNothing guards a
// re-seed whose record lost, of a shard its reader still reads, that a
// newcomer released under the same token number (tokens start again at 1
// after each wipe): the lease is answered done (neither renewed nor lost),
// the shard keeps the newcomer's later position, and when no holder of the
// kept record claims it the records between the reader's position and the
// newcomer's start are never read.
func TestIntegrationLostRecordReseedOfANewcomersReleaseSkipsNothing(t *testing.T) {
	t.Parallel()
	kept, middle, newcomer, flush := threeRecords(t)
	ctx := t.Context()
	_, err := kept.Join(ctx)
	require.NoError(t, err)
	keptHeld, err := kept.Acquire(ctx, "other", "kept")
	require.NoError(t, err)

	flush()
	_, err = middle.Join(ctx)
	require.NoError(t, err)
	mid, err := middle.Acquire(ctx, "shard", "middle")
	require.NoError(t, err)

	flush()
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)
	require.Equal(t, mid.Token, took.Token)
	require.NoError(t, newcomer.Commit(ctx, took.Lease, consumer.Position{Sequence: "900"}))
	require.NoError(t, newcomer.Release(ctx, took.Lease))

	_, err = kept.Reseed(ctx, consumer.Seed{Owner: "kept", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{keptHeld.Lease}})
	require.NoError(t, err)
	res, err := middle.Reseed(ctx, consumer.Seed{Owner: "middle", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{mid.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	cps, err := kept.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"shard"}, renewedShards(res), "lost %v", res.Lost)
	_, ok := cps["shard"]
	assert.False(t, ok, "the shard keeps the newcomer's later position %v", cps["shard"])
}

// TestIntegrationLostRecordReseedKeepsNoOwnLeaseOverASettledPosition guards
// a re-seed whose record lost confirming its own lease of a shard whose
// position a holder of the kept record wrote back since (settled): the
// newcomer took the shard from its own, later `latest` start, its re-seed
// renews the lease, and its commits then pass the settled position; once
// it is cut off the next take reads from there, past the records a paused
// holder of the kept record (taken from that position) had not delivered.
func TestIntegrationLostRecordReseedKeepsNoOwnLeaseOverASettledPosition(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 3, 300*time.Millisecond)
	seeder, paused, newcomer := stores[0], stores[1], stores[2]
	c := red.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	_, err := seeder.Join(ctx)
	require.NoError(t, err)
	_, err = paused.Join(ctx)
	require.NoError(t, err)
	first, err := seeder.Acquire(ctx, "shard", "seeder")
	require.NoError(t, err)
	require.NoError(t, seeder.Commit(ctx, first.Lease, consumer.Position{Sequence: "500"}))
	require.NoError(t, seeder.Release(ctx, first.Lease))
	// The paused holder takes the shard from 500, delivers a little past it
	// and pauses.
	held, err := paused.Acquire(ctx, "shard", "paused")
	require.NoError(t, err)
	require.Equal(t, "paused", held.Owner)

	time.Sleep(5 * time.Millisecond) // a later start for the newcomer's record
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)
	require.Equal(t, "newcomer", took.Owner)

	_, err = seeder.Reseed(ctx, consumer.Seed{Owner: "seeder",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}})
	require.NoError(t, err)
	res, err := newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer",
		Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{took.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	if len(res.Renewed) == 1 {
		// The newcomer's reader reads on and commits, then is cut off.
		require.NoError(t, newcomer.Commit(ctx, res.Renewed[0], consumer.Position{Sequence: "1000"}))
	}
	var next consumer.Take
	require.Eventually(t, func() bool {
		next, err = seeder.Acquire(ctx, "shard", "seeder")
		return err == nil && next.Owner == "seeder"
	}, 10*time.Second, 50*time.Millisecond, "the shard is never taken again: %v", err)
	assert.Equal(t, consumer.Position{Sequence: "500"}, next.Checkpoint,
		"the next take passes the paused kept holder's position (renewed %v, lost %v)", renewedShards(res), res.Lost)
}

// TestIntegrationSettlingReseedFencesALosingRecordsLease guards a re-seed
// of the kept record writing its position into a provisional shard
// (settled) whose lease an instance of a record that lost still holds,
// confirmed by its own earlier re-seed: that reader reads on from its own,
// later `latest` start and its commits pass the settled position; once it
// is cut off the next take reads from there, past the records a paused
// holder of the kept record (taken from that position) had not delivered.
func TestIntegrationSettlingReseedFencesALosingRecordsLease(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 4, 300*time.Millisecond)
	seeder, paused, other, newcomer := stores[0], stores[1], stores[2], stores[3]
	c := red.Client()
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	for _, s := range stores[:3] {
		_, err := s.Join(ctx)
		require.NoError(t, err)
	}
	otherHeld, err := other.Acquire(ctx, "other", "other")
	require.NoError(t, err)
	first, err := seeder.Acquire(ctx, "shard", "seeder")
	require.NoError(t, err)
	require.NoError(t, seeder.Commit(ctx, first.Lease, consumer.Position{Sequence: "500"}))
	require.NoError(t, seeder.Release(ctx, first.Lease))
	held, err := paused.Acquire(ctx, "shard", "paused")
	require.NoError(t, err)
	require.Equal(t, "paused", held.Owner)

	time.Sleep(5 * time.Millisecond) // a later start for the newcomer's record
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard", "newcomer")
	require.NoError(t, err)
	require.Equal(t, "newcomer", took.Owner)

	// Another holder of the kept record re-seeds first; the newcomer, told
	// its record is gone, re-seeds and loses it but keeps its lease (the
	// shard had no position to pass yet).
	_, err = other.Reseed(ctx, consumer.Seed{Owner: "other", Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{otherHeld.Lease}})
	require.NoError(t, err)
	res, err := newcomer.Reseed(ctx, consumer.Seed{Owner: "newcomer",
		Checkpoints: map[string]consumer.Position{}, Leases: []consumer.Lease{took.Lease}})
	require.NoError(t, err)
	require.True(t, res.RecordLost)
	lease := took.Lease
	if len(res.Renewed) == 1 {
		lease = res.Renewed[0]
	}
	// The seeder, paused longer, writes back the shard's position (settled).
	_, err = seeder.Reseed(ctx, consumer.Seed{Owner: "seeder",
		Checkpoints: map[string]consumer.Position{"shard": {Sequence: "500"}}})
	require.NoError(t, err)
	// The newcomer's reader reads on and commits, then is cut off.
	commitErr := newcomer.Commit(ctx, lease, consumer.Position{Sequence: "1000"})
	var next consumer.Take
	require.Eventually(t, func() bool {
		next, err = seeder.Acquire(ctx, "shard", "seeder")
		return err == nil && next.Owner == "seeder"
	}, 10*time.Second, 50*time.Millisecond, "the shard is never taken again: %v", err)
	assert.Equal(t, consumer.Position{Sequence: "500"}, next.Checkpoint,
		"the next take passes the paused kept holder's position (the losing reader's commit: %v)", commitErr)
}
