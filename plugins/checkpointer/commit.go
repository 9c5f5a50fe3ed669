package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Commit stores p as the shard's checkpoint if l is still the current lease.
// A position not after the stored one is a no-op, so the checkpoint never
// moves backwards. ErrLeaseLost when fenced. With replicas to wait for
// (min_replicas_to_ack), the commit is done only once they acknowledged it.
func (s *Store) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if l.Owner == "" || l.Token == 0 {
		return fmt.Errorf("committing shard %s: no lease held: %w", l.Shard, consumer.ErrLeaseLost)
	}
	if p.IsZero() {
		return fmt.Errorf("committing shard %s: empty position", l.Shard)
	}
	what := fmt.Sprintf("committing %s for shard %s", p, l.Shard)
	start := time.Now()
	defer func() { s.c.commitLatency.Timing(time.Since(start).Nanoseconds(), s.streamLabel()) }()
	err := s.replicated(ctx, what, func(c redis.Scripter) error {
		n, err := commitScript.Run(ctx, c, []string{s.keys.Leases, s.keys.Checkpoints, s.keys.Epoch},
			l.Shard, l.Owner, l.Token, p.String(), s.knownEpoch()).Int64()
		if err != nil {
			return storeErr(what, err)
		}
		if n == 0 {
			return fmt.Errorf("%s (token %d): %w", what, l.Token, consumer.ErrLeaseLost)
		}
		return nil
	})
	if err != nil {
		s.c.errors.Incr(1, s.streamLabel())
		return err
	}
	s.c.commits.Incr(1, s.streamLabel())
	return nil
}

// Checkpoint reads the shard's checkpoint; ok is false when there is none.
// A Redis error is returned as an error, never as "no checkpoint".
func (s *Store) Checkpoint(ctx context.Context, shard string) (consumer.Position, bool, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Checkpoints, shard).Result()
	if errors.Is(err, redis.Nil) {
		return consumer.Position{}, false, nil
	}
	if err != nil {
		return consumer.Position{}, false, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
	}
	p, err := consumer.ParsePosition(v)
	if err != nil {
		return consumer.Position{}, false, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
	}
	return p, true, nil
}

// Checkpoints reads every shard's checkpoint.
func (s *Store) Checkpoints(ctx context.Context) (map[string]consumer.Position, error) {
	all, err := s.c.client.HGetAll(ctx, s.keys.Checkpoints).Result()
	if err != nil {
		return nil, fmt.Errorf("reading checkpoints: %w", err)
	}
	out := make(map[string]consumer.Position, len(all))
	for shard, v := range all {
		// The start override and per-shard starts (fields beginning with
		// '_', which no shard id does) are not checkpoints.
		if strings.HasPrefix(shard, "_") {
			continue
		}
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return nil, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
		}
		out[shard] = p
	}
	return out, nil
}
