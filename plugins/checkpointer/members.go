package checkpointer

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redis/go-redis/v9"
)

// Heartbeat records member as alive now, by Redis TIME.
func (s *Store) Heartbeat(ctx context.Context, member string) error {
	if err := heartbeatScript.Run(ctx, s.c.client, []string{s.keys.Members}, member).Err(); err != nil {
		return fmt.Errorf("heartbeating member %s: %w", member, err)
	}
	return nil
}

// HeartbeatAll records member alive now in every store's stream, in one
// call where Redis is not a Cluster (heartbeats.lua), so an instance pays
// one call a renewal period for its heartbeats however many streams it
// reads. In a Cluster, and for a store of another Checkpointer or kind,
// each heartbeats on its own (consumer.HeartbeatsBatcher).
func (s *Store) HeartbeatAll(ctx context.Context, member string, stores []consumer.Store) []error {
	errs := make([]error, len(stores))
	_, cluster := s.c.client.(*redis.ClusterClient)
	var batch []int
	var keys []string
	var alone []int
	for i, st := range stores {
		if o, ok := st.(*Store); ok && o.c == s.c && !cluster {
			batch, keys = append(batch, i), append(keys, o.keys.Members)
			continue
		}
		alone = append(alone, i)
	}
	wait := onTheirOwn(alone, func(i int) { errs[i] = stores[i].Heartbeat(ctx, member) })
	defer wait()
	if len(batch) == 0 {
		return errs
	}
	if err := heartbeatsScript.Run(ctx, s.c.client, keys, member).Err(); err != nil {
		for _, i := range batch {
			errs[i] = fmt.Errorf("heartbeating member %s in %d streams: %w", member, len(batch), err)
		}
	}
	return errs
}

var _ consumer.HeartbeatsBatcher = (*Store)(nil)

// LiveMembers lists, sorted, the members that heartbeat within the lease
// period, and removes the others.
func (s *Store) LiveMembers(ctx context.Context) ([]string, error) {
	ms, err := liveMembersScript.Run(ctx, s.c.client, []string{s.keys.Members}, s.periodMillis()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	slices.Sort(ms)
	return ms, nil
}

// RemoveMember removes member at once (on graceful shutdown), so others
// rebalance without waiting for its heartbeat to age out.
func (s *Store) RemoveMember(ctx context.Context, member string) error {
	if err := removeMemberScript.Run(ctx, s.c.client, []string{s.keys.Members}, member).Err(); err != nil {
		return fmt.Errorf("removing member %s: %w", member, err)
	}
	return nil
}

// LiveMembersReadOnly lists, sorted, the members that heartbeat within the
// lease period without pruning the others (for inspection).
func (s *Store) LiveMembersReadOnly(ctx context.Context) ([]string, error) {
	res, err := nowScript.Run(ctx, s.c.client, []string{s.keys.Members}).Int64()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	ms, err := s.c.client.ZRangeByScore(ctx, s.keys.Members, &redis.ZRangeBy{
		Min: strconv.FormatInt(res-s.periodMillis(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	slices.Sort(ms)
	return ms, nil
}
