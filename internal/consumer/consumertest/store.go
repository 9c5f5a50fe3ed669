package consumertest

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Store is an in-memory Store with fencing and lease expiry by the
// local clock.
type Store struct {
	Mu       sync.Mutex
	Period   time.Duration
	Ckpt     map[string]consumer.Position
	Closed   map[string]bool
	LeaseMap map[string]consumer.Lease
	Members  map[string]time.Time
	Handoff  map[string]string
	// HandoffAt is when each hand-off request was made; a request older
	// than HandoffMaxAge lapses as the Redis store's does (0: never). It
	// starts at the lapse for Config's balancing period: a test running
	// another period sets it to match.
	HandoffAt     map[string]time.Time
	HandoffMaxAge time.Duration
	Tokens        int64
	Commits       []string // "shard=seq" of every successful commit
	// LoseOnRenew makes RenewAll report these shards lost (and drop them).
	LoseOnRenew map[string]bool
	// Rounds counts LiveMembers calls: one per balancing round of each
	// instance.
	Rounds int
	// Progress and publishes record PublishProgress calls.
	Progress  map[string]consumer.Progress
	Publishes int
	// OldLoads are progress entries as a release without bytes/s wrote
	// them (Known false).
	OldLoads map[string]consumer.ShardLoad
	// Start is the group's start, as the store would record it at the
	// first take.
	Start time.Time
	// Created is the stream creation time the group's state belongs to.
	Created time.Time
	// Released is when each shard's lease was last released, as the Redis
	// store keeps it in the released lease.
	Released map[string]time.Time
	// ReseededClosed lists every close a Reseed carried, in order: what
	// instances wrote back, apart from the closes readers made.
	ReseededClosed []string
	// RecordLost makes Reseed answer that the caller's group record lost
	// to the one the store kept.
	RecordLost bool
	// Reopened are the shards a re-seed won back from a newcomer's close
	// (the Redis store's reopened list), until a reader closes them or
	// they are pruned: as
	// there, Reseed writes no close over them, and ReopenedShards lists
	// them for a balancing round.
	Reopened map[string]bool
	// Fenced holds the leases each clear of the group's state (a stream
	// created again, StreamCreated) fenced, as they were before it, by the
	// creation time (Unix nanoseconds) of the stream they were of: what
	// the holder of a batch read from the deleted stream held.
	Fenced map[int64]map[string]consumer.Lease
}

func NewStore(period time.Duration) *Store {
	return &Store{Period: period, Ckpt: map[string]consumer.Position{}, Closed: map[string]bool{}, LeaseMap: map[string]consumer.Lease{},
		Members: map[string]time.Time{}, Handoff: map[string]string{}, HandoffAt: map[string]time.Time{}, LoseOnRenew: map[string]bool{}, Progress: map[string]consumer.Progress{}, Start: time.Now(),
		Released: map[string]time.Time{}, HandoffMaxAge: consumer.HandoffRequestMaxAge(Config().RebalancePeriod)}
}

func (s *Store) Live(l consumer.Lease, ok bool) bool {
	return ok && l.Owner != "" && time.Now().Before(l.ExpiresAt)
}

// Join lets the instance take at once: the fake store never forgets.
func (s *Store) Join(context.Context) (time.Duration, error) { return 0, nil }

func (s *Store) Acquire(_ context.Context, shard, owner string) (consumer.Take, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	l, ok := s.LeaseMap[shard]
	// As the Redis store's: a live lease is never taken, not even under
	// its holder's own id (another process under the same id).
	if s.Live(l, ok) {
		return consumer.Take{Lease: l}, consumer.ErrLeaseHeld
	}
	// How long ago the previous lease ended, as the Redis store tells.
	quiet := time.Duration(-1)
	if r, was := s.Released[shard]; was {
		quiet = time.Since(r)
	} else if ok && l.Owner != "" {
		quiet = time.Since(l.ExpiresAt)
	}
	delete(s.Released, shard)
	s.Tokens++
	l = consumer.Lease{Shard: shard, Owner: owner, Token: s.Tokens, ExpiresAt: time.Now().Add(s.Period), Deadline: time.Now().Add(s.Period)}
	s.LeaseMap[shard] = l
	return consumer.Take{Lease: l, Checkpoint: s.Ckpt[shard], GroupStart: s.Start, Quiet: quiet}, nil
}

// StreamCreated clears the group's state when the stream's creation time
// changed, as the Redis store does.
func (s *Store) StreamCreated(_ context.Context, seen, current time.Time) (bool, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	recorded := s.Created
	if recorded.IsZero() {
		recorded = seen
	}
	if current.Before(recorded) {
		return false, consumer.ErrOlderStream
	}
	s.Created = current
	if recorded.Equal(current) {
		return false, nil
	}
	s.Ckpt, s.Closed, s.Handoff = map[string]consumer.Position{}, map[string]bool{}, map[string]string{}
	if s.Fenced == nil {
		s.Fenced = map[int64]map[string]consumer.Lease{}
	}
	s.Fenced[recorded.UnixNano()] = maps.Clone(s.LeaseMap)
	for id, l := range s.LeaseMap {
		// Freed at time 0 with its token raised, as the Redis store does:
		// its owner is fenced out.
		s.LeaseMap[id] = consumer.Lease{Shard: id, Token: l.Token + 1, ExpiresAt: time.UnixMilli(0)}
	}
	return true, nil
}

// Reseed restores what the seed holds, as the Redis store does: only
// forward checkpoints, and the leases nobody else holds.
func (s *Store) Reseed(_ context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	for shard, p := range seed.Checkpoints {
		if cur, ok := s.Ckpt[shard]; !ok || p.Compare(cur) > 0 {
			s.Ckpt[shard] = p
		}
	}
	for _, shard := range seed.Closed {
		s.ReseededClosed = append(s.ReseededClosed, shard)
		if s.Reopened[shard] {
			continue
		}
		s.Closed[shard], s.Ckpt[shard] = true, consumer.Position{ShardEnd: true}
	}
	res := consumer.Reseeded{GroupStart: s.Start, RecordLost: s.RecordLost}
	for _, l := range seed.Leases {
		if cur, ok := s.LeaseMap[l.Shard]; s.Live(cur, ok) && cur.Owner != seed.Owner {
			res.Lost = append(res.Lost, l.Shard)
			continue
		}
		l.ExpiresAt, l.Deadline = time.Now().Add(s.Period), time.Now().Add(s.Period)
		s.LeaseMap[l.Shard] = l
		res.Renewed = append(res.Renewed, l)
	}
	return res, nil
}

// Prune removes the entries of shards whose lease is not live, as the
// Redis store's prune script does.
func (s *Store) Prune(_ context.Context, shards []string) ([]string, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var pruned []string
	for _, id := range shards {
		if l, ok := s.LeaseMap[id]; s.Live(l, ok) {
			continue
		}
		delete(s.Ckpt, id)
		delete(s.Closed, id)
		delete(s.LeaseMap, id)
		delete(s.Progress, id)
		delete(s.Handoff, id)
		delete(s.Released, id)
		delete(s.Reopened, id)
		pruned = append(pruned, id)
	}
	return pruned, nil
}

func (s *Store) Owns(l consumer.Lease) bool {
	cur, ok := s.LeaseMap[l.Shard]
	return ok && cur.Owner == l.Owner && cur.Token == l.Token
}

func (s *Store) RenewAll(_ context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var renewed []consumer.Lease
	var lost []string
	for _, l := range ls {
		if s.LoseOnRenew[l.Shard] {
			s.Tokens++
			s.LeaseMap[l.Shard] = consumer.Lease{Shard: l.Shard, Owner: "thief", Token: s.Tokens, ExpiresAt: time.Now().Add(time.Hour)}
		}
		if !s.Owns(l) {
			lost = append(lost, l.Shard)
			continue
		}
		l.ExpiresAt, l.Deadline = time.Now().Add(s.Period), time.Now().Add(s.Period)
		s.LeaseMap[l.Shard] = l
		renewed = append(renewed, l)
	}
	return renewed, lost, nil
}

func (s *Store) Release(_ context.Context, l consumer.Lease) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if !s.Owns(l) {
		return consumer.ErrLeaseLost
	}
	// Released, the lease keeps its token, as the Redis store's does.
	s.LeaseMap[l.Shard] = consumer.Lease{Shard: l.Shard, Token: l.Token, ExpiresAt: time.Now()}
	delete(s.Handoff, l.Shard)
	s.Released[l.Shard] = time.Now()
	return nil
}

func (s *Store) Commit(_ context.Context, l consumer.Lease, p consumer.Position) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if !s.Owns(l) {
		return consumer.ErrLeaseLost
	}
	s.Ckpt[l.Shard] = p
	s.Commits = append(s.Commits, l.Shard+"="+p.Sequence)
	return nil
}

func (s *Store) CloseShard(_ context.Context, l consumer.Lease) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if !s.Owns(l) {
		return consumer.ErrLeaseLost
	}
	s.Ckpt[l.Shard] = consumer.Position{ShardEnd: true}
	s.Closed[l.Shard] = true
	delete(s.Reopened, l.Shard)
	// Released at time 0 with its token, as the Redis store's close does.
	s.LeaseMap[l.Shard] = consumer.Lease{Shard: l.Shard, Token: l.Token, ExpiresAt: time.UnixMilli(0)}
	return nil
}

func (s *Store) Checkpoint(_ context.Context, shard string) (consumer.Position, bool, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	p, ok := s.Ckpt[shard]
	return p, ok, nil
}

func (s *Store) Checkpoints(context.Context) (map[string]consumer.Position, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]consumer.Position{}
	for k, v := range s.Ckpt {
		out[k] = v
	}
	return out, nil
}

func (s *Store) ClosedShards(context.Context) (map[string]bool, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]bool{}
	for k, v := range s.Closed {
		out[k] = v
	}
	return out, nil
}

// ReopenedShards lists the shards a re-seed won back from a close and
// nobody closed since (consumer.ReopenedReader).
func (s *Store) ReopenedShards(context.Context) (map[string]bool, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return maps.Clone(s.Reopened), nil
}

var _ consumer.ReopenedReader = (*Store)(nil)

func (s *Store) Leases(context.Context) (map[string]consumer.LeaseState, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]consumer.LeaseState{}
	for k, l := range s.LeaseMap {
		out[k] = consumer.LeaseState{Lease: l, Expired: !s.Live(l, true)}
	}
	return out, nil
}

func (s *Store) Heartbeat(_ context.Context, member string) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Members[member] = time.Now()
	return nil
}

func (s *Store) LiveMembers(context.Context) ([]string, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Rounds++
	var out []string
	for m, at := range s.Members {
		if time.Since(at) < s.Period {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *Store) RemoveMember(_ context.Context, member string) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	delete(s.Members, member)
	return nil
}

func (s *Store) RequestHandoff(_ context.Context, shard, requester string) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Handoff[shard] = requester
	s.HandoffAt[shard] = time.Now()
	return nil
}

func (s *Store) HandoffRequests(_ context.Context, owner string) (map[string]string, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]string{}
	for shard, req := range s.Handoff {
		if at, ok := s.HandoffAt[shard]; ok && s.HandoffMaxAge > 0 && time.Since(at) > s.HandoffMaxAge {
			delete(s.Handoff, shard)
			continue
		}
		if l, ok := s.LeaseMap[shard]; ok && l.Owner == owner {
			out[shard] = req
		}
	}
	return out, nil
}

func (s *Store) PublishProgress(_ context.Context, owner string, ps map[string]consumer.Progress) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Publishes++
	for shard, p := range ps {
		if l, ok := s.LeaseMap[shard]; ok && l.Owner == owner {
			s.Progress[shard] = p
		}
	}
	return nil
}

func (s *Store) ShardLoads(context.Context) (map[string]consumer.ShardLoad, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[string]consumer.ShardLoad{}
	for shard, p := range s.Progress {
		out[shard] = consumer.ShardLoad{BytesPerSecond: p.BytesPerSecond, Known: true}
	}
	for shard, l := range s.OldLoads {
		out[shard] = l
	}
	return out, nil
}

// Published returns the last progress published per shard and how many
// publish calls were made.
func (s *Store) Published() (map[string]consumer.Progress, int) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return maps.Clone(s.Progress), s.Publishes
}

func (s *Store) BalancingRounds() int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.Rounds
}

func (s *Store) CommitLog() []string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return append([]string(nil), s.Commits...)
}
