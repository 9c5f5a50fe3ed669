package checkpointer

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Guards a hand-off request that never lapsed: a holder that held one back
// (cooling down from a move) honoured it after its requester had stopped
// waiting for the shard, and released a shard nobody took. A request older
// than its max age (two balancing periods, by Redis time) is neither
// listed nor kept, by each of the three reads that list requests; a fresh
// one is.
func TestIntegrationAHandOffRequestLapsesAfterItsMaxAge(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, _ := countedCheckpointer(t, red.URL(), "g")
	admin := red.Client()
	defer admin.Close()
	reads := map[string]func(ctx context.Context, s *Store) (map[string]string, error){
		"HandoffRequests": func(ctx context.Context, s *Store) (map[string]string, error) {
			return s.HandoffRequests(ctx, "a")
		},
		"ReadRound": func(ctx context.Context, s *Store) (map[string]string, error) {
			rd, err := s.ReadRound(ctx, "a")
			return rd.Handoffs, err
		},
		"ReadRounds": func(ctx context.Context, s *Store) (map[string]string, error) {
			rds, errs := s.ReadRounds(ctx, "a", []consumer.Store{s}, false)
			return rds[0].Handoffs, errs[0]
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := ck.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/lapse-%s", name))
			_, err := s.Join(ctx)
			require.NoError(t, err)
			for _, m := range []string{"a", "b"} {
				require.NoError(t, s.Heartbeat(ctx, m))
			}
			_ = mustAcquire(t, s, "shard-0")
			_ = mustAcquire(t, s, "shard-1")
			require.NoError(t, s.RequestHandoff(ctx, "shard-0", "b"))
			now, err := admin.Time(ctx).Result()
			require.NoError(t, err)
			maxAge := consumer.HandoffRequestMaxAge(ck.Config().RebalancePeriod)
			// b asked for shard-1 just over the max age ago, by Redis time.
			old := fmt.Sprintf("b|%d", now.Add(-maxAge).UnixMilli()-100)
			require.NoError(t, admin.HSet(ctx, s.Keys().Handoff, "shard-1", old).Err())

			reqs, err := read(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"shard-0": "b"}, reqs, "the lapsed request is not listed")
			kept, err := admin.HExists(ctx, s.Keys().Handoff, "shard-1").Result()
			require.NoError(t, err)
			assert.False(t, kept, "and deleted")
		})
	}
}
