package consumer

import (
	"context"
	"time"
)

// An instance that reads shards checks, at a pace of its own and in one
// cheap call, that the store still holds the group record it knows. That
// pace, not the renewals' third of a lease period, bounds how long a
// store that came back empty goes unnoticed by a holder that Redis
// answers, and so how long a newcomer must wait before it takes anything
// from a young, un-re-seeded group record (NewcomerWait): the first record
// of a brand-new group then comes seconds, not a lease period, after the
// start.

// GroupCheckInterval is how often an instance that holds leases checks the
// group record: every second, or a third of a shorter lease period. Each
// check is bounded by half of it, so a check that hangs never delays the
// next.
func GroupCheckInterval(leasePeriod time.Duration) time.Duration {
	return min(time.Second, leasePeriod/3)
}

// NewcomerWait is how long after a group record's creation a newcomer
// waits before taking anything, while no re-seed marked the record: two
// check intervals (at most a lease period). A holder that Redis answers
// from the moment it came back empty starts a check within one interval
// of the record's creation, which finds the record replaced and wakes
// its re-seed; the second interval is the margin for those round trips.
// A re-seed holds every shard the store does not know for a lease period.
func NewcomerWait(leasePeriod time.Duration) time.Duration {
	return min(leasePeriod, 2*GroupCheckInterval(leasePeriod))
}

// RestartWait is how long a Redis server must have been up before a
// newcomer takes anything from a group record created since it started
// that no re-seed marked: a lease period and the newcomer wait. A Redis
// restarted empty may have had holders that were paused or cut off while it
// restarted; each of them whose lease was live then wakes within the lease
// period, finds the record replaced within a check interval and re-seeds,
// and a holder paused past its lease would have lost its shard to another
// instance anyway. A flushed Redis leaves no such trace: there the tie of
// tokens goes to the holder when it re-seeds (docs/checkpointer.md).
func RestartWait(leasePeriod time.Duration) time.Duration {
	return leasePeriod + NewcomerWait(leasePeriod)
}

// YoungServer is a Store that can tell, after Join, that it waited for its
// Redis server to have been up RestartWait, and how long it had been up.
type YoungServer interface {
	JoinedYoungServer() (uptime time.Duration, young bool)
}

// GroupChecker is a Store that can tell in one call whether it still holds
// the group record its caller knows: ErrStoreForgot when it does not. A
// Store without it is noticed to forget only by renewals.
type GroupChecker interface {
	CheckGroup(ctx context.Context) error
}

// GroupsChecker is a GroupChecker that can check, in the same call as its
// own, the group records of other stores of the input (one per stream):
// an instance reading a hundred streams then checks them in one call a
// second, not a hundred. errs[i] is stores[i]'s answer, ErrStoreForgot
// when that store forgot; a store it cannot batch is checked on its own.
type GroupsChecker interface {
	GroupChecker
	CheckGroups(ctx context.Context, stores []Store) (errs []error)
}

// HeartbeatsBatcher is a Store that can heartbeat a member in other stores
// of the input (one per stream) in the same call as in its own. errs[i] is
// stores[i]'s answer; a store it cannot batch is heartbeaten on its own.
type HeartbeatsBatcher interface {
	HeartbeatAll(ctx context.Context, member string, stores []Store) (errs []error)
}

// Renewal is one stream's answer to a batched renewal: RenewAll's.
type Renewal struct {
	Renewed []Lease
	Lost    []string
	Err     error
}

// RenewalsBatcher is a Store that can renew the leases of other stores of
// the input (one per stream) in the same call as its own: leases[i] are
// stores[i]'s, and the answer at i is RenewAll's for that stream. A store
// it cannot batch is renewed on its own.
type RenewalsBatcher interface {
	RenewStreams(ctx context.Context, owner string, stores []Store, leases [][]Lease) []Renewal
}

// ProgressBatcher is a Store that can publish the progress of other stores
// of the input (one per stream) in the same call as its own: ps[i] is
// stores[i]'s. A store it cannot batch publishes on its own.
type ProgressBatcher interface {
	PublishProgressAll(ctx context.Context, owner string, stores []Store, ps []map[string]Progress) (errs []error)
}

// Round is what a balancing round reads of a stream: the live members
// (sorted), the closed shards, the leases and the hand-off requests for
// the caller's shards.
type Round struct {
	Members  []string
	Closed   map[string]bool
	Leases   map[string]LeaseState
	Handoffs map[string]string
	// Loads are the shards' published loads (ShardLoads), when the read
	// was asked for them (balancing by load): then never nil, empty when
	// none is published; nil when not asked.
	Loads map[string]ShardLoad
	// Reopened are the shards a re-seed won back from a close a newcomer
	// made on an emptied store and that nobody has closed since: a close
	// of theirs an instance learned before is not the store's, so it is
	// neither written back nor counted closed until the store's closed
	// set holds it again.
	Reopened map[string]bool
}

// RoundReader is a Store that reads a balancing round's state in one call,
// with the effects of LiveMembers, ClosedShards (ErrStoreForgot too),
// Leases and HandoffRequests.
type RoundReader interface {
	ReadRound(ctx context.Context, owner string) (Round, error)
}

// ReopenedReader is a Store that tells its Round.Reopened shards apart
// from a round read in one call: a balancing round that reads the store
// call by call asks it for them.
type ReopenedReader interface {
	ReopenedShards(ctx context.Context) (map[string]bool, error)
}

// RoundsReader is a RoundReader that can read the rounds of other stores
// of the input (one per stream) in the same call as its own: the answer at
// i is ReadRound's for stores[i], with the shards' loads when loads is
// set. A store it cannot batch reads its own.
type RoundsReader interface {
	RoundReader
	ReadRounds(ctx context.Context, owner string, stores []Store, loads bool) ([]Round, []error)
}

// TakesBatcher is a Store that takes several shards' leases in one call:
// each shard in turn exactly as Acquire would take it alone, in one round
// trip. A balancing round at thousands of shards is bound by its takes'
// round trips, not by Redis's work.
type TakesBatcher interface {
	// AcquireMany answers one TakeResult per shard, in shards' order. An
	// error of the whole call (the store unreachable, ErrStoreForgot) is
	// every result's.
	AcquireMany(ctx context.Context, shards []string, owner string) []TakeResult
}

// TakeResult is one shard's answer of AcquireMany: Acquire's.
type TakeResult struct {
	Take Take
	Err  error
}

// HandoffRequestsBatcher is a Store that asks for several shards' hand-off
// in one call, each as RequestHandoff would: a member that joined late asks
// for its whole shortfall, hundreds of shards at 10,000.
type HandoffRequestsBatcher interface {
	RequestHandoffs(ctx context.Context, shards []string, requester string) error
}
