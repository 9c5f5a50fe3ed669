package checkpointer

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// An instance reading many streams checks every stream's group record, and
// heartbeats in every stream, in one Redis call (issue 37's steady-state
// cost), and still tells each stream's answer apart: a stream whose record
// is gone or replaced is forgotten, the others are not, and a store that
// never joined is skipped.
func TestIntegrationGroupChecksAndHeartbeatsAreOneCallForEveryStream(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	opts, err := redis.ParseURL(cfg.RedisURL)
	require.NoError(t, err)
	client := redis.NewClient(opts)
	defer client.Close()
	hook := &countingHook{}
	client.AddHook(hook)
	ck := NewFromClient(client, cfg, nil, nil)

	const streams = 20
	stores := make([]consumer.Store, streams)
	for i := range stores {
		s := ck.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/s-%d", i))
		if i != streams-1 { // the last one never joins
			_, err := s.Join(t.Context())
			require.NoError(t, err)
		}
		stores[i] = s
	}
	first := stores[0].(*Store)
	first.CheckGroups(t.Context(), stores) // loads the script (EVALSHA, NOSCRIPT, EVAL)

	before := hook.n.Load()
	errs := first.CheckGroups(t.Context(), stores)
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, err := range errs {
		assert.NoError(t, err, "stream %d", i)
	}

	admin := red.Client()
	defer admin.Close()
	require.NoError(t, admin.Del(t.Context(), stores[3].(*Store).Keys().Epoch).Err())
	require.NoError(t, admin.HSet(t.Context(), stores[7].(*Store).Keys().Epoch, "id", "someone-else").Err())
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs {
		switch i {
		case 3:
			assert.ErrorIs(t, err, consumer.ErrStoreForgot, "record gone")
			assert.ErrorContains(t, err, "found none")
		case 7:
			assert.ErrorIs(t, err, consumer.ErrStoreForgot, "record replaced")
			assert.ErrorContains(t, err, "found someone-else")
		default:
			assert.NoError(t, err, "stream %d", i)
		}
	}

	require.NoError(t, admin.FlushAll(t.Context()).Err())
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs[:streams-1] {
		assert.ErrorIs(t, err, consumer.ErrStoreForgot, "stream %d after FLUSHALL", i)
	}
	assert.NoError(t, errs[streams-1], "a store that never joined knows no record to check")

	// The member's heartbeats go the same way: one call for every stream,
	// each of which then lists the member as live.
	before = hook.n.Load()
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		require.NoError(t, err, "stream %d", i)
	}
	assert.Equal(t, int64(2), hook.n.Load()-before, "one call for %d streams (and the script's first load)", streams)
	before = hook.n.Load()
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		require.NoError(t, err, "stream %d", i)
	}
	assert.Equal(t, int64(1), hook.n.Load()-before, "one call for %d streams", streams)
	for i, st := range stores {
		live, err := st.LiveMembers(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []string{"m-1"}, live, "stream %d", i)
	}

	// A Redis that does not answer fails every stream's check, none forgot.
	red.Stop()
	errs = first.CheckGroups(t.Context(), stores)
	for i, err := range errs[:streams-1] {
		require.Error(t, err, "stream %d", i)
		assert.NotErrorIs(t, err, consumer.ErrStoreForgot)
	}
	for i, err := range first.HeartbeatAll(t.Context(), "m-1", stores) {
		assert.Error(t, err, "stream %d", i)
	}
}
