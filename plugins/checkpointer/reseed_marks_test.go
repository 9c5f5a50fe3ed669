package checkpointer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A holder that wins a tie back while the newcomer still runs reads again
// what the newcomer delivered since the store forgot: its re-seed must tell
// it how far that was (the store's mark, which the newcomer raised), or it
// delivers those records again unmarked with the mark its own take read.
//
// Guards: the re-seed gave the holder no mark, so its reader marked only up
// to its pre-wipe mark.
func TestIntegrationReseedTieTellsTheHolderHowFarTheNewcomerDelivered(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, newcomer := stores[0], stores[1]
	ctx := t.Context()
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx, "shard-0", "holder")
	require.NoError(t, err)
	_, err = holder.WriteDelivered(ctx, "holder", []DeliveredMark{{Shard: "shard-0", Token: held.Token, Position: consumer.Position{Sequence: "120"}}})
	require.NoError(t, err)
	require.NoError(t, holder.Commit(ctx, held.Lease, consumer.Position{Sequence: "100"}))

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard-0", "newcomer")
	require.NoError(t, err)
	// The newcomer read from its own record's start and delivered up to 900.
	_, err = newcomer.WriteDelivered(ctx, "newcomer", []DeliveredMark{{Shard: "shard-0", Token: took.Token, Position: consumer.Position{Sequence: "900"}}})
	require.NoError(t, err)

	res, err := holder.Reseed(ctx, consumer.Seed{Owner: "holder",
		Checkpoints: map[string]consumer.Position{"shard-0": {Sequence: "150"}}, Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	require.Equal(t, []string{"shard-0"}, renewedShards(res), "the tie goes to the holder")
	t.Logf("holder's take read mark %v; re-seed told it %v", held.Delivered, res.Delivered)
	assert.Equal(t, consumer.Position{Sequence: "900"}, res.Delivered["shard-0"],
		"the holder reads again up to the newcomer's mark, and must deliver those records marked")
}

// TestIntegrationLostReseedReplyMarkWriterFindsNewcomersMark guards
// "failed re-seed marks": a holder whose re-seed won the shard back but
// whose reply was lost never learned the newcomer's mark from it, and its
// reader, confirmed by the next renewal, delivered what the newcomer had
// delivered again unmarked. Its first mark write must tell it instead.
func TestIntegrationLostReseedReplyMarkWriterFindsNewcomersMark(t *testing.T) {
	t.Parallel()
	stores, red := forgetStores(t, 2, 30*time.Second)
	holder, newcomer := stores[0], stores[1]
	ctx := t.Context()
	_, err := holder.Join(ctx)
	require.NoError(t, err)
	held, err := holder.Acquire(ctx, "shard-0", "holder")
	require.NoError(t, err)
	_, err = holder.WriteDelivered(ctx, "holder", []DeliveredMark{{Shard: "shard-0", Token: held.Token, Position: consumer.Position{Sequence: "120"}}})
	require.NoError(t, err)

	c := red.Client()
	defer c.Close()
	require.NoError(t, c.FlushAll(ctx).Err())
	_, err = newcomer.Join(ctx)
	require.NoError(t, err)
	took, err := newcomer.Acquire(ctx, "shard-0", "newcomer")
	require.NoError(t, err)
	_, err = newcomer.WriteDelivered(ctx, "newcomer", []DeliveredMark{{Shard: "shard-0", Token: took.Token, Position: consumer.Position{Sequence: "900"}}})
	require.NoError(t, err)

	// The re-seed runs and wins the shard back; its reply is dropped here,
	// as a call that timed out after the script ran leaves the caller.
	_, err = holder.Reseed(ctx, consumer.Seed{Owner: "holder", Leases: []consumer.Lease{held.Lease}})
	require.NoError(t, err)
	renewed, lost, err := holder.RenewAll(ctx, "holder", []consumer.Lease{held.Lease})
	require.NoError(t, err)
	require.Empty(t, lost)
	require.Len(t, renewed, 1, "the renewal after the lost reply confirms the lease")

	w := holder.NewMarkWriter("holder", 10*time.Millisecond)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { stop(); <-done }()
	require.NoError(t, w.Cover(ctx, renewed[0], consumer.Position{Sequence: "130"}))
	assert.Equal(t, consumer.Position{Sequence: "900"}, w.Found(renewed[0]),
		"the write tells the holder's reader how far the newcomer delivered, so it marks what it reads again")
	require.NoError(t, w.Cover(ctx, renewed[0], consumer.Position{Sequence: "950"}))
	require.NoError(t, w.Cover(ctx, renewed[0], consumer.Position{Sequence: "960"}))
	assert.Equal(t, consumer.Position{Sequence: "900"}, w.Found(renewed[0]),
		"the writer's own 950 is not found: records up to it that the reader has not handed over yet go unmarked")
	assert.Zero(t, w.Found(consumer.Lease{Shard: "shard-0", Token: renewed[0].Token + 1}), "a found mark belongs to the token it was found under")
}

// ranThenFails lets a script call run and then fails it once armed, as a
// call whose reply timed out after Redis ran it, or whose replicas did not
// acknowledge it in time.
type ranThenFails struct{ armed atomic.Bool }

func (f *ranThenFails) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *ranThenFails) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && err == nil && f.armed.CompareAndSwap(true, false) {
			err = errors.New("i/o timeout (injected after the script ran)")
			cmd.SetErr(err)
		}
		return err
	}
}
func (f *ranThenFails) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestIntegrationMarkWriterRetryFindsItsOwnMarkNotAnothers guards a found
// mark taken for another owner's when it is this writer's own: a mark write
// that ran but whose reply was lost (a timeout, replicas that did not
// acknowledge) is retried, and the retry finds the position the failed
// try stored. Reported by Found, it raised the reader's mark over records
// no one handed over yet, and they went out marked as redelivered.
func TestIntegrationMarkWriterRetryFindsItsOwnMarkNotAnothers(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	s := joinedStore(t, backend{url: r.URL(), kind: KindSimple})
	l := marked(t, s, "shardId-000000000000", "a").Lease
	// Loaded once, so that EVALSHA is not answered NOSCRIPT (EVAL follows).
	_, err := s.WriteDelivered(t.Context(), "a", []DeliveredMark{mark(l, pos(t, "10"))})
	require.NoError(t, err)
	hook := &ranThenFails{}
	s.c.client.AddHook(hook)
	w := startMarkWriter(t, s, 20*time.Millisecond)

	require.NoError(t, w.Cover(t.Context(), l, pos(t, "20")))
	hook.armed.Store(true)
	require.NoError(t, w.Cover(t.Context(), l, pos(t, "30")))
	require.False(t, hook.armed.Load(), "the first write of 30 ran and failed")
	got, err := s.Delivered(t.Context())
	require.NoError(t, err)
	require.Equal(t, pos(t, "30"), got[l.Shard])
	// 10 was stored before this writer wrote, as a take's mark is; 30 is
	// its own, whose records the reader hands over only now.
	assert.Equal(t, pos(t, "10"), w.Found(l), "the records up to 30 must go unmarked")
}
