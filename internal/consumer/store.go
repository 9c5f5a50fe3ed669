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
)

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
	// Acquire takes a free or expired lease; ErrLeaseHeld when another
	// owner holds a live one.
	Acquire(ctx context.Context, shard, owner string) (Lease, error)
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
	Checkpoint(ctx context.Context, shard string) (Position, bool, error)
	Checkpoints(ctx context.Context) (map[string]Position, error)
	ClosedShards(ctx context.Context) (map[string]bool, error)
	Leases(ctx context.Context) (map[string]LeaseState, error)
	Heartbeat(ctx context.Context, member string) error
	LiveMembers(ctx context.Context) ([]string, error)
	RemoveMember(ctx context.Context, member string) error
	RequestHandoff(ctx context.Context, shard, requester string) error
	HandoffRequests(ctx context.Context, owner string) (map[string]string, error)
	// StartOverride returns the start position an operator reset the group
	// to; ok is false when there is none and the configured start_position
	// applies.
	StartOverride(ctx context.Context) (o StartOverride, ok bool, err error)
	// PublishProgress records, for operators, the progress of the shards
	// owner reads, in one call; only shards owner holds are written.
	PublishProgress(ctx context.Context, owner string, ps map[string]Progress) error
}
