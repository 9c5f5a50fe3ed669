package chaos

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// wipeWritePause bounds how long the writes of every client wait between
// the soak's read of the lease holders and the wipe (CLIENT PAUSE WRITE):
// a Redis that restarts ends the pause with its process, a flush ends it
// itself, and a wipe that never comes lets it lapse.
const wipeWritePause = 10_000 // milliseconds

// pauseWritesAndReadLeases holds back every client's writes, then reads
// the lease hashes at keys (by label) and Redis's clock, and returns each
// shard's live holder by label/shard (its pid, 0 when the lease lapsed or
// was released). No release, hand-off or take lands between this read and
// the wipe that follows, so the holders are exactly those the wipe meets.
// Reading the leases while writes still landed left a gap: redis-server
// goes on answering for up to a cron tick after the SIGTERM that stops it,
// and an instance stopping at that moment released a shard in it (seed 10
// with efo: y2, scale-in SIGTERM at the wipe of 4 min 28 s, was judged
// the live holder of soak-dyn-3#1's shard 1, which it had released, and
// the next owner's unmarked copies counted as broken promises). The reads
// are plain HGETALLs: a script counts as a write under the pause.
func pauseWritesAndReadLeases(ctx context.Context, rc redis.UniversalClient, keys map[string]string) (map[string]int, error) {
	if err := rc.Do(ctx, "CLIENT", "PAUSE", wipeWritePause, "WRITE").Err(); err != nil {
		return nil, fmt.Errorf("pausing the writes before the wipe: %w", err)
	}
	labels := make([]string, 0, len(keys))
	var clock *redis.TimeCmd
	cmds := map[string]*redis.MapStringStringCmd{}
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		clock = p.Time(ctx)
		for label, key := range keys {
			labels = append(labels, label)
			cmds[label] = p.HGetAll(ctx, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the leases before the wipe: %w", err)
	}
	now := clock.Val().UnixMilli()
	out := map[string]int{}
	for _, label := range labels {
		for shard, v := range cmds[label].Val() {
			out[label+"/"+shard] = liveHolder(v, now)
		}
	}
	return out, nil
}

// liveHolder is the pid of the owner of a lease value that is live at
// now, else 0.
func liveHolder(v string, now int64) int {
	owner, exp, _, ok := checkpointer.ParseLeaseValue(v)
	if !ok || owner == "" || exp <= now {
		return 0
	}
	return pidOfOwner(owner)
}

// flushPaused ends the write pause and empties Redis in one round trip.
// The flush is a write, held back like any other until the pause ends;
// Redis runs the commands of one read in order before the clients the
// unpause woke, so the writes held back run after the flush, on the empty
// store.
func flushPaused(ctx context.Context, rc redis.UniversalClient) error {
	var flush *redis.StatusCmd
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "CLIENT", "UNPAUSE")
		flush = p.FlushAll(ctx)
		return nil
	})
	if err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return flush.Err()
}
