package consumer

import (
	"context"
	"maps"
	"sync"
	"time"
)

// fakeStore is an in-memory Store with fencing and lease expiry by the
// local clock.
type fakeStore struct {
	mu      sync.Mutex
	period  time.Duration
	ckpt    map[string]Position
	closed  map[string]bool
	leases  map[string]Lease
	members map[string]time.Time
	handoff map[string]string
	tokens  int64
	commits []string // "shard=seq" of every successful commit
	// loseOnRenew makes RenewAll report these shards lost (and drop them).
	loseOnRenew map[string]bool
	// rounds counts LiveMembers calls: one per balancing round of each
	// instance.
	rounds int
	// progress and publishes record PublishProgress calls.
	progress  map[string]Progress
	publishes int
	// oldLoads are progress entries as a release without bytes/s wrote
	// them (Known false).
	oldLoads map[string]ShardLoad
	// start is the group's start, as the store would record it at the
	// first take.
	start time.Time
	// created is the stream creation time the group's state belongs to.
	created time.Time
	// released is when each shard's lease was last released, as the Redis
	// store keeps it in the released lease.
	released map[string]time.Time
}

func newFakeStore(period time.Duration) *fakeStore {
	return &fakeStore{period: period, ckpt: map[string]Position{}, closed: map[string]bool{}, leases: map[string]Lease{},
		members: map[string]time.Time{}, handoff: map[string]string{}, loseOnRenew: map[string]bool{}, progress: map[string]Progress{}, start: time.Now(),
		released: map[string]time.Time{}}
}

func (s *fakeStore) live(l Lease, ok bool) bool {
	return ok && l.Owner != "" && time.Now().Before(l.ExpiresAt)
}

// Join lets the instance take at once: the fake store never forgets.
func (s *fakeStore) Join(context.Context) (time.Duration, error) { return 0, nil }

func (s *fakeStore) Acquire(_ context.Context, shard, owner string) (Take, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[shard]
	if s.live(l, ok) && l.Owner != owner {
		return Take{Lease: l}, ErrLeaseHeld
	}
	// How long ago the previous lease ended, as the Redis store tells.
	quiet := time.Duration(-1)
	if r, was := s.released[shard]; was {
		quiet = time.Since(r)
	} else if ok && l.Owner != "" {
		quiet = time.Since(l.ExpiresAt)
	}
	delete(s.released, shard)
	s.tokens++
	l = Lease{Shard: shard, Owner: owner, Token: s.tokens, ExpiresAt: time.Now().Add(s.period), Deadline: time.Now().Add(s.period)}
	s.leases[shard] = l
	return Take{Lease: l, Checkpoint: s.ckpt[shard], GroupStart: s.start, Quiet: quiet}, nil
}

// StreamCreated clears the group's state when the stream's creation time
// changed, as the Redis store does.
func (s *fakeStore) StreamCreated(_ context.Context, seen, current time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recorded := s.created
	if recorded.IsZero() {
		recorded = seen
	}
	s.created = current
	if recorded.Equal(current) {
		return false, nil
	}
	s.ckpt, s.closed, s.handoff = map[string]Position{}, map[string]bool{}, map[string]string{}
	for id, l := range s.leases {
		// Freed at time 0 with its token raised, as the Redis store does:
		// its owner is fenced out.
		s.leases[id] = Lease{Shard: id, Token: l.Token + 1, ExpiresAt: time.UnixMilli(0)}
	}
	return true, nil
}

// Reseed restores what the seed holds, as the Redis store does: only
// forward checkpoints, and the leases nobody else holds.
func (s *fakeStore) Reseed(_ context.Context, seed Seed) (Reseeded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for shard, p := range seed.Checkpoints {
		if cur, ok := s.ckpt[shard]; !ok || p.Compare(cur) > 0 {
			s.ckpt[shard] = p
		}
	}
	for _, shard := range seed.Closed {
		s.closed[shard], s.ckpt[shard] = true, Position{ShardEnd: true}
	}
	res := Reseeded{GroupStart: s.start}
	for _, l := range seed.Leases {
		if cur, ok := s.leases[l.Shard]; s.live(cur, ok) && cur.Owner != seed.Owner {
			res.Lost = append(res.Lost, l.Shard)
			continue
		}
		l.ExpiresAt, l.Deadline = time.Now().Add(s.period), time.Now().Add(s.period)
		s.leases[l.Shard] = l
		res.Renewed = append(res.Renewed, l)
	}
	return res, nil
}

// Prune removes the entries of shards whose lease is not live, as the
// Redis store's prune script does.
func (s *fakeStore) Prune(_ context.Context, shards []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pruned []string
	for _, id := range shards {
		if l, ok := s.leases[id]; s.live(l, ok) {
			continue
		}
		delete(s.ckpt, id)
		delete(s.closed, id)
		delete(s.leases, id)
		delete(s.progress, id)
		delete(s.handoff, id)
		delete(s.released, id)
		pruned = append(pruned, id)
	}
	return pruned, nil
}

func (s *fakeStore) owns(l Lease) bool {
	cur, ok := s.leases[l.Shard]
	return ok && cur.Owner == l.Owner && cur.Token == l.Token
}

func (s *fakeStore) RenewAll(_ context.Context, owner string, ls []Lease) ([]Lease, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var renewed []Lease
	var lost []string
	for _, l := range ls {
		if s.loseOnRenew[l.Shard] {
			s.tokens++
			s.leases[l.Shard] = Lease{Shard: l.Shard, Owner: "thief", Token: s.tokens, ExpiresAt: time.Now().Add(time.Hour)}
		}
		if !s.owns(l) {
			lost = append(lost, l.Shard)
			continue
		}
		l.ExpiresAt, l.Deadline = time.Now().Add(s.period), time.Now().Add(s.period)
		s.leases[l.Shard] = l
		renewed = append(renewed, l)
	}
	return renewed, lost, nil
}

func (s *fakeStore) Release(_ context.Context, l Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owns(l) {
		return ErrLeaseLost
	}
	// Released, the lease keeps its token, as the Redis store's does.
	s.leases[l.Shard] = Lease{Shard: l.Shard, Token: l.Token, ExpiresAt: time.Now()}
	delete(s.handoff, l.Shard)
	s.released[l.Shard] = time.Now()
	return nil
}

func (s *fakeStore) Commit(_ context.Context, l Lease, p Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owns(l) {
		return ErrLeaseLost
	}
	s.ckpt[l.Shard] = p
	s.commits = append(s.commits, l.Shard+"="+p.Sequence)
	return nil
}

func (s *fakeStore) CloseShard(_ context.Context, l Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.owns(l) {
		return ErrLeaseLost
	}
	s.ckpt[l.Shard] = Position{ShardEnd: true}
	s.closed[l.Shard] = true
	// Released at time 0 with its token, as the Redis store's close does.
	s.leases[l.Shard] = Lease{Shard: l.Shard, Token: l.Token, ExpiresAt: time.UnixMilli(0)}
	return nil
}

func (s *fakeStore) Checkpoint(_ context.Context, shard string) (Position, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ckpt[shard]
	return p, ok, nil
}

func (s *fakeStore) Checkpoints(context.Context) (map[string]Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Position{}
	for k, v := range s.ckpt {
		out[k] = v
	}
	return out, nil
}

func (s *fakeStore) ClosedShards(context.Context) (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for k, v := range s.closed {
		out[k] = v
	}
	return out, nil
}

func (s *fakeStore) Leases(context.Context) (map[string]LeaseState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]LeaseState{}
	for k, l := range s.leases {
		out[k] = LeaseState{Lease: l, Expired: !s.live(l, true)}
	}
	return out, nil
}

func (s *fakeStore) Heartbeat(_ context.Context, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[member] = time.Now()
	return nil
}

func (s *fakeStore) LiveMembers(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	var out []string
	for m, at := range s.members {
		if time.Since(at) < s.period {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *fakeStore) RemoveMember(_ context.Context, member string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members, member)
	return nil
}

func (s *fakeStore) RequestHandoff(_ context.Context, shard, requester string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handoff[shard] = requester
	return nil
}

func (s *fakeStore) HandoffRequests(_ context.Context, owner string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for shard, req := range s.handoff {
		if l, ok := s.leases[shard]; ok && l.Owner == owner {
			out[shard] = req
		}
	}
	return out, nil
}

func (s *fakeStore) PublishProgress(_ context.Context, owner string, ps map[string]Progress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishes++
	for shard, p := range ps {
		if l, ok := s.leases[shard]; ok && l.Owner == owner {
			s.progress[shard] = p
		}
	}
	return nil
}

func (s *fakeStore) ShardLoads(context.Context) (map[string]ShardLoad, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]ShardLoad{}
	for shard, p := range s.progress {
		out[shard] = ShardLoad{BytesPerSecond: p.BytesPerSecond, Known: true}
	}
	for shard, l := range s.oldLoads {
		out[shard] = l
	}
	return out, nil
}

// published returns the last progress published per shard and how many
// publish calls were made.
func (s *fakeStore) published() (map[string]Progress, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.progress), s.publishes
}

func (s *fakeStore) balancingRounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds
}

func (s *fakeStore) commitLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commits...)
}
