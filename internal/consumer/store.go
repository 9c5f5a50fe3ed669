package consumer

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors a Store returns, matched with errors.Is.
var (
	// ErrLeaseHeld means another live owner holds the lease.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLost means the caller does not own the lease it presented: it
	// expired and was taken, was released, its fencing token is stale, or it
	// is no lease at all. The reader of that shard stops at once.
	ErrLeaseLost = errors.New("lease lost")
	// ErrStoreForgot means the store no longer holds the group's state the
	// caller knew: its group record vanished or was replaced (Redis
	// restarted empty, flushed or replaced), or a lease the caller holds is
	// unknown to it. Nobody took anything: the caller keeps what it holds
	// and re-seeds the store (Store.Reseed).
	ErrStoreForgot = errors.New("checkpoint store forgot the group's state")
	// ErrOlderStream means the caller's creation time of the stream is
	// earlier than the one the group's state belongs to: it saw a deleted
	// incarnation (a listing made before the stream was created again).
	// Nothing was cleared; the caller describes the stream again.
	ErrOlderStream = errors.New("the stream's creation time is earlier than the group's")
)

// HandoffRequestRounds is how many balancing periods a hand-off request
// lasts in the store. Its holder's round sees it within one period (two,
// for a round that ran late); a holder that holds it back (a cool-down of
// balancing by load, or a count that no longer evens out) lets it lapse
// rather than release a shard after its requester stopped waiting for it,
// which would leave the shard unowned. A requester that still lacks the
// shard asks again.
const HandoffRequestRounds = 2

// HandoffRequestMaxAge is how long a hand-off request lasts in the store
// at the given balancing period (HandoffRequestRounds periods).
func HandoffRequestMaxAge(rebalancePeriod time.Duration) time.Duration {
	return HandoffRequestRounds * rebalancePeriod
}

// Take is a lease just acquired, with what its reader starts from, read in
// the same call: the shard's checkpoint, the operator's start override and
// the group's start (and, for a shard without a checkpoint, its own start).
type Take struct {
	Lease
	// Checkpoint is the shard's stored position; zero when it has none.
	Checkpoint Position
	// Override is the start an operator reset the group to; nil when none,
	// and the configured start_position applies.
	Override *StartOverride
	// ShardStart is where this shard begins while it has no checkpoint, as
	// an import stored it for a shard its source had not started (at its
	// beginning, or at a timestamp); it comes before Override. nil when
	// none.
	ShardStart *StartOverride
	// GroupStart is when the group first took a shard of the stream, by the
	// store's clock: `latest` means "written since then".
	GroupStart time.Time
	// Quiet is how long ago, by the store's clock, the shard's previous
	// lease ended (expired, or released by its holder, which stopped reading
	// first); negative when the store does not know (no lease before, or the
	// store forgot it). The first GetRecords waits poll_interval less this
	// (coordinator.firstRead).
	Quiet time.Duration
	// Delivered is the redelivery mark: the highest position an earlier
	// owner may have handed to a pipeline (a MarkingStore's, zero
	// otherwise). Records at or below it are delivered marked
	// (Batch.Redelivered).
	Delivered Position
}

// Seed is what an instance knows of a group's state, written back into a
// store that forgot it.
type Seed struct {
	Owner string
	// Checkpoints are the positions the instance holds (acked or
	// committed); the store keeps the later of its own and these.
	Checkpoints map[string]Position
	// Closed are the shards the instance knows closed.
	Closed []string
	// Override is the operator's start override it last saw, if any.
	Override *StartOverride
	// Leases are the leases it holds, restored with their tokens.
	Leases []Lease
	// Created is the creation time of the stream the checkpoints belong
	// to (zero when unknown), written back with them so that a stream
	// deleted and created again afterwards is still told apart.
	Created time.Time
}

// Reseeded says what a re-seed found and left.
type Reseeded struct {
	// FoundEpoch is the group record the store held before ("" when none).
	FoundEpoch string
	// Epoch and GroupStart are the group record now stored.
	Epoch      string
	GroupStart time.Time
	// RecordLost says the store kept another group record than the one
	// the caller presented (an older one: the caller's was made on an
	// emptied store). What the caller wrote under its record counts only
	// until a holder of the kept record claims the shard.
	RecordLost bool
	// Renewed are the seed's leases the caller holds again; Lost are the
	// shards another owner took meanwhile.
	Renewed []Lease
	Lost    []string
	// Delivered is the store's redelivery mark of each renewed shard that
	// has one: how far any owner, a newcomer the caller won the shard back
	// from included, may have delivered it.
	Delivered map[string]Position
}

// Lease is the right to read one shard, held by Owner and fenced by Token:
// the token grows with every acquisition, and commits and renewals must
// present it.
type Lease struct {
	Shard, Owner string
	Token        int64
	// ExpiresAt is by the store's clock.
	ExpiresAt time.Time
	// Deadline is by the local clock: the lease runs out no sooner than this
	// (measured from before the call was sent, so it errs early). A reader
	// that could not renew by then must have stopped.
	Deadline time.Time
}

// LeaseState is a lease as the store sees it, expiry judged by its clock.
type LeaseState struct {
	Lease
	// Expired is true for an expired or released lease (Owner "" when
	// released); anyone may take it.
	Expired bool
	// ExpiresIn is the time left, zero when expired.
	ExpiresIn time.Duration
}

// Store keeps the checkpoints, closed shards, leases and members of one
// stream for one consumer group. Every method takes the caller's ctx and
// returns store trouble as an error, never as an absent value. The Redis
// checkpointer (plugins/checkpointer) implements it.
type Store interface {
	// Acquire takes a free or expired lease, with the shard's checkpoint
	// and the group's start; ErrLeaseHeld when a live one is held, even
	// under owner's own id (another process under the same id). It presents the group record Join found (or, without a Join,
	// joins the group itself, creating the record if there is none); it
	// and every other mutation return ErrStoreForgot when that record is
	// gone or replaced.
	Acquire(ctx context.Context, shard, owner string) (Take, error)
	// Join runs before an instance's first take: it creates the group
	// record if there is none, learns its id, and returns how long to wait
	// before taking anything. A record created less than NewcomerWait ago,
	// and that no re-seed has marked, may belong to a store that just
	// forgot the group while other instances still read their shards;
	// they check the record every GroupCheckInterval and re-seed within
	// that wait. An error refuses the store (e.g. one written in a newer
	// format).
	Join(ctx context.Context) (wait time.Duration, err error)
	// RenewAll renews owner's leases in one call and names the lost ones;
	// err means no lease is known to be renewed.
	RenewAll(ctx context.Context, owner string, ls []Lease) (renewed []Lease, lost []string, err error)
	Release(ctx context.Context, l Lease) error
	// Commit stores p as the shard's checkpoint if l still holds the lease
	// (else ErrLeaseLost); a checkpoint never moves backwards.
	Commit(ctx context.Context, l Lease, p Position) error
	// CloseShard marks a shard read to its end and committed, and releases
	// its lease, in one step: this opens the gate for its children.
	CloseShard(ctx context.Context, l Lease) error
	// Reseed writes back what an instance knows into a store that forgot
	// the group, and restores its leases.
	Reseed(ctx context.Context, seed Seed) (Reseeded, error)
	// StreamCreated compares the stream's creation time now (current) with
	// the one the group's state belongs to (as recorded, else seen); when
	// current is later the stream was recreated, and the deleted stream's
	// checkpoints, closed shards, leases and hand-off requests are cleared
	// in one step. cleared is true for the one caller that cleared. When
	// current is earlier, nothing changes and the error is ErrOlderStream:
	// only a newer incarnation clears.
	StreamCreated(ctx context.Context, seen, current time.Time) (cleared bool, err error)
	ClosedShards(ctx context.Context) (map[string]bool, error)
	// Prune removes every entry of shards the stream no longer lists
	// (checkpoint, closed mark, lease, progress, hand-off request), except
	// those whose lease is live, and returns the shards pruned. The caller
	// names only shards that nothing needs any more (prune.go).
	Prune(ctx context.Context, shards []string) (pruned []string, err error)
	Leases(ctx context.Context) (map[string]LeaseState, error)
	Heartbeat(ctx context.Context, member string) error
	LiveMembers(ctx context.Context) ([]string, error)
	RemoveMember(ctx context.Context, member string) error
	RequestHandoff(ctx context.Context, shard, requester string) error
	// HandoffRequests returns shard -> requester for the shards owner
	// holds live that a live member asked for within the last
	// HandoffRequestRounds balancing periods (by the store's clock);
	// older requests are deleted, since their requesters no longer wait
	// for them.
	HandoffRequests(ctx context.Context, owner string) (map[string]string, error)
	// PublishProgress records, for operators and for balancing by load,
	// the progress of the shards owner reads, in one call; only shards
	// owner holds are written.
	PublishProgress(ctx context.Context, owner string, ps map[string]Progress) error
	// ShardLoads reads, in one call, the load every owner last published
	// per shard; shards nobody published for are absent.
	ShardLoads(ctx context.Context) (map[string]ShardLoad, error)
}
