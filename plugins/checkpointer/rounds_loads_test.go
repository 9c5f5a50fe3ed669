package checkpointer

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// slowLoadsStore is a stream's store whose published loads cannot be read
// in time (a progress hash of thousands of fields on a loaded Redis); as a
// store that is not a *Store, ReadRounds reads its round on its own, as it
// reads every stream's in a Cluster.
type slowLoadsStore struct{ *Store }

func (slowLoadsStore) ShardLoads(context.Context) (map[string]consumer.ShardLoad, error) {
	return nil, errors.New("reading published progress: context deadline exceeded")
}

// Guards the scale run's lost rounds: a round whose loads could not be
// read was failed whole, so a member whose progress read kept timing out
// never balanced (it handed over nothing it was asked for). The round
// stands without its loads; the balancing reads them again, or balances
// by count.
func TestIntegrationARoundWhoseLoadsCannotBeReadStillStands(t *testing.T) {
	t.Parallel()
	red := testenv.NewRedis(t)
	ck, _ := countedCheckpointer(t, red.URL(), "g")
	ctx := t.Context()
	s := ck.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/slow-loads")
	_, err := s.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Heartbeat(ctx, "a"))
	_ = mustAcquire(t, s, "shard-0")
	require.NoError(t, s.RequestHandoff(ctx, "shard-0", "a"))

	rounds, errs := s.ReadRounds(ctx, "a", []consumer.Store{slowLoadsStore{s}}, true)

	require.NoError(t, errs[0], "the round stands without its loads")
	assert.Equal(t, []string{"a"}, rounds[0].Members)
	assert.Contains(t, rounds[0].Leases, "shard-0")
	assert.Nil(t, rounds[0].Loads, "no loads, so the balancing reads them itself (not an empty read, which says none were published)")
}
