package coordinator

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// startLogged starts a consumer named owner on st whose INFO lines go to
// logs, acking every batch it hands over.
func startLogged(t *testing.T, cfg consumer.Config, owner string, api consumer.KinesisAPI, st consumer.Store, logs *consumertest.SyncBuffer) *Consumer {
	t.Helper()
	cfg.InstanceID = owner
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	c, err := New(cfg, api, func(string) consumer.Store { return st }, log, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case b := <-c.Batches():
				b.Ack(nil)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = c.Close(t.Context())
		close(done)
	})
	return c
}

// infoLines are the INFO lines of logs holding sub.
func infoLines(logs *consumertest.SyncBuffer, sub string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=INFO") && strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// Guards issue 60 item 5: a failover logged nothing. The survivor of a
// member that stopped renewing says, in one INFO line for the round, how
// many shards it took and from which member.
func TestFailoverTakeIsLoggedOncePerRound(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	st := consumertest.NewStore(time.Minute)
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"} {
		api.Add(id, &consumertest.KinesisShard{Records: 3})
		st.Tokens++
		// b held them and stopped renewing: each lease ran out.
		st.LeaseMap[id] = consumer.Lease{Shard: id, Owner: "b", Token: st.Tokens, ExpiresAt: time.Now().Add(-time.Second)}
	}
	var logs consumertest.SyncBuffer
	startLogged(t, testConfig(), "a", api, st, &logs)
	const line = "Took over shards from members that stopped renewing their leases"
	require.Eventually(t, func() bool { return len(infoLines(&logs, line)) > 0 }, 10*time.Second, 20*time.Millisecond, "no failover line; log:\n%s", logs.String())
	time.Sleep(300 * time.Millisecond) // a few more rounds: nothing more to say
	got := infoLines(&logs, line)
	require.Len(t, got, 1, "one line for the round, not one per shard")
	assert.Contains(t, got[0], "3 shards (shardId-000000000000, shardId-000000000001, shardId-000000000002) from member b")
	assert.Contains(t, got[0], "lease.period, 600ms")
}

// Guards issue 60 item 5: a hand-off logged nothing. The member that gives
// shards up says so in one line naming the shards and who asked; the one
// that takes them says so too.
func TestHandOffIsLoggedOncePerRound(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	for i := range 4 {
		api.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{Records: 3})
	}
	st := consumertest.NewStore(time.Minute)
	cfg := testConfig()
	cfg.Balance = consumer.BalanceCount
	var logsA, logsB consumertest.SyncBuffer
	startLogged(t, cfg, "a", api, st, &logsA)
	require.Eventually(t, func() bool {
		st.Mu.Lock()
		defer st.Mu.Unlock()
		return len(st.LeaseMap) == 4
	}, 10*time.Second, 20*time.Millisecond, "a did not take the 4 shards")
	startLogged(t, cfg, "b", api, st, &logsB)
	const gave, took = "Handing over shards that other members asked for", "that their previous owners released (a hand-off or a stop)"
	require.Eventually(t, func() bool { return len(infoLines(&logsB, took)) > 0 }, 10*time.Second, 20*time.Millisecond, "b logged no take; a:\n%s\nb:\n%s", logsA.String(), logsB.String())
	time.Sleep(300 * time.Millisecond)
	g := infoLines(&logsA, gave)
	require.Len(t, g, 1, "one line for the round's hand-offs; a:\n%s", logsA.String())
	assert.Regexp(t, `2 shards \(shardId-\d+, shardId-\d+\) to member b`, g[0])
	tk := infoLines(&logsB, took)
	assert.Len(t, tk, 1, "b:\n%s", logsB.String())
	assert.Contains(t, tk[0], "Took 2 shards (")
}

// Guards issue 60 item 5: a split logged nothing. Once the parent is read
// to its end and closed, one INFO line names it and its children, ready to
// read.
func TestSplitIsLoggedWhenChildrenBecomeReady(t *testing.T) {
	t.Parallel()
	api := consumertest.NewKinesis()
	api.Add("shardId-000000000000", &consumertest.KinesisShard{Records: 5, Closed: true})
	api.Add("shardId-000000000001", &consumertest.KinesisShard{Records: 3, Parent: "shardId-000000000000"})
	api.Add("shardId-000000000002", &consumertest.KinesisShard{Records: 3, Parent: "shardId-000000000000"})
	st := consumertest.NewStore(time.Minute)
	var logs consumertest.SyncBuffer
	startLogged(t, testConfig(), "a", api, st, &logs)
	const line = "Parent shards closed"
	require.Eventually(t, func() bool { return len(infoLines(&logs, line)) > 0 }, 10*time.Second, 20*time.Millisecond, "no split line; log:\n%s", logs.String())
	time.Sleep(300 * time.Millisecond)
	got := infoLines(&logs, line)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "Parent shards closed (read to their end, acknowledged and committed): shardId-000000000000; their children are ready to read: 2 shards (shardId-000000000001, shardId-000000000002)")
}
