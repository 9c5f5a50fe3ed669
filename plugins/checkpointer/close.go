package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// CloseShard marks the shard fully consumed: checkpoint SHARD_END, the shard
// added to the closed set (which lets its children be read) and the lease
// released. Without replicas to wait for, that is one script. With them it
// is two steps, each acknowledged by the replicas before the next: first
// the fenced SHARD_END checkpoint, then the closed set and the release. A
// failover can then lose at most the second step, and the new owner of the
// shard finds SHARD_END and closes it again without reading it. A step the
// replicas did not acknowledge in time is an error, and the caller retries
// the close. ErrLeaseLost when fenced.
func (s *Store) CloseShard(ctx context.Context, l consumer.Lease) error {
	if l.Owner == "" || l.Token == 0 {
		return fmt.Errorf("closing shard %s: no lease held: %w", l.Shard, consumer.ErrLeaseLost)
	}
	what := "closing shard " + l.Shard
	// A close opens the gate for the shard's children: whether the master
	// has a replica to wait for is asked anew, not taken from the cache,
	// so a replica that reconnected is waited for at once.
	s.replicas.forget()
	n, err := s.replicas.want(ctx, s)
	if err == nil && n > 0 {
		err = s.Commit(ctx, l, consumer.Position{ShardEnd: true})
	}
	provisional := false
	if err == nil {
		err = s.replicated(ctx, what, func(c redis.Scripter) error {
			n, err := closeScript.Run(ctx, c, []string{s.keys.Leases, s.keys.Checkpoints, s.keys.Closed, s.keys.Handoff, s.keys.Epoch},
				l.Shard, l.Owner, l.Token, s.knownEpoch()).Int64()
			if err != nil {
				return storeErr(what, err)
			}
			if n != 1 && n != 2 {
				return fmt.Errorf("%s (token %d): %w", what, l.Token, consumer.ErrLeaseLost)
			}
			provisional = n == 2
			return nil
		})
	}
	if err != nil {
		if errors.Is(err, ErrNotReplicated) {
			s.log.With("shard", l.Shard).Warnf("Closing the shard is not acknowledged by a replica yet; retrying: %v", err)
		}
		s.c.errors.Incr(1, s.streamLabel())
		return err
	}
	s.c.commits.Incr(1, s.streamLabel())
	// This store's own close, made under the record it knows, is no
	// longer one it learned only as provisional, unless it was made under
	// a lease a re-seed whose record lost kept (provisional under the kept
	// record): this instance read the shard from its own record's later
	// `latest`, and the close is not re-seeded as the kept record's.
	s.epochMu.Lock()
	if provisional {
		if s.provClosed == nil {
			s.provClosed = map[string]bool{}
		}
		s.provClosed[l.Shard] = true
	} else {
		delete(s.provClosed, l.Shard)
	}
	s.epochMu.Unlock()
	s.log.With("shard", l.Shard).Debug("Shard closed")
	return nil
}

// ClosedShards reads the set of shards fully consumed and committed. Once
// this store took a shard, a store that forgot the group gives
// ErrStoreForgot rather than its empty set.
func (s *Store) ClosedShards(ctx context.Context) (map[string]bool, error) {
	res, err := closedScript.Run(ctx, s.c.client, []string{s.keys.Closed, s.keys.Epoch}, s.knownEpoch()).Slice()
	if err != nil {
		return nil, storeErr("reading closed shards", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("reading closed shards: unexpected script reply %v", res)
	}
	ms, _ := res[0].([]any)
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[toString(m)] = true
	}
	s.noteProvisionalCloses(out, toString(res[1]))
	return out, nil
}

// noteProvisionalCloses notes, of the closed shards the store lists, those
// it lists as provisional too (reseed.lua): closes made under a group
// record a re-seed replaced, from that record's own, later `latest`, that
// no holder of the kept record has settled. A shard the store lists closed
// and not provisional is a close of the kept record's world. A shard it no
// longer lists keeps what was noted: the store may have forgotten the
// group since, while the caller still knows the close.
func (s *Store) noteProvisionalCloses(closed map[string]bool, provisional string) {
	prov := map[string]bool{}
	for _, f := range strings.Fields(provisional) {
		prov[f] = true
	}
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	for id := range closed {
		if prov[id] {
			if s.provClosed == nil {
				s.provClosed = map[string]bool{}
			}
			s.provClosed[id] = true
		} else {
			delete(s.provClosed, id)
		}
	}
}
