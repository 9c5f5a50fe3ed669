package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
)

// DiscoveryRound is what one round of DiscoverStreams did.
type DiscoveryRound struct {
	// Listed: this instance held the lease and listed the streams.
	Listed bool
	// Pruned are the keys of released streams whose Redis keys this round
	// deleted; Kept those still read somewhere (tried again next round).
	Pruned, Kept []string
}

// DiscoverStreams runs one round of the group's stream discovery for the
// instance owner, every interval: it claims the lease; if granted, calls
// list (a streams.Lister's List with the input's rules), publishes the
// result and prunes the keys of streams released longer ago than
// retention; then, lease or not, reads the group's result. A failed list
// publishes nothing: the lease lapses after interval and the last result
// stays. The checkpointer itself never calls Kinesis.
func (c *Checkpointer) DiscoverStreams(ctx context.Context, owner string, interval, retention time.Duration, list func(context.Context) ([]streams.Identity, error)) (Discovery, DiscoveryRound, error) {
	return c.DiscoverStreamsSeeded(ctx, owner, interval, retention, Discovery{}, list)
}

// DiscoverStreamsSeeded is DiscoverStreams by an instance that read the
// group's result before (seed, its last read): if Redis forgot the group's
// discovery (flushed, or restarted empty), the listing this round
// publishes keeps the group's first listing time and what the instance
// knew of each stream, so a stream created meanwhile still counts as
// appeared and starts at new_stream_start_position.
func (c *Checkpointer) DiscoverStreamsSeeded(ctx context.Context, owner string, interval, retention time.Duration, seed Discovery, list func(context.Context) ([]streams.Identity, error)) (Discovery, DiscoveryRound, error) {
	var round DiscoveryRound
	claim, err := c.ClaimDiscovery(ctx, owner, interval)
	if err != nil {
		return Discovery{}, round, err
	}
	if claim.Granted {
		found, err := c.listHolding(ctx, owner, claim.Token, interval, list)
		if err != nil {
			return Discovery{}, round, fmt.Errorf("listing the streams for the group: %w", err)
		}
		published, expired, err := c.publishDiscovery(ctx, owner, claim.Token, found, retention, seed)
		if err != nil {
			return Discovery{}, round, err
		}
		round.Listed = published
		for _, key := range expired {
			pruned, err := c.PruneReleased(ctx, owner, claim.Token, interval, key)
			if errors.Is(err, ErrDiscoveryLeaseLost) {
				// Another instance lists now; what is still expired
				// then, it prunes.
				break
			}
			if err != nil {
				return Discovery{}, round, err
			}
			if pruned {
				round.Pruned = append(round.Pruned, key)
			} else {
				round.Kept = append(round.Kept, key)
			}
		}
	}
	d, err := c.ReadDiscovery(ctx)
	return d, round, err
}

// listHolding calls list while renewing the caller's discovery lease every
// third of the interval, so a listing longer than the interval keeps it:
// TestIntegrationManyStreamsFoundAndLeased saw listings of 100 streams
// (each described, on an emulator under load) outlast the 5 s lease, be
// fenced as another instance claimed it, and new streams wait a minute to
// be found. A renewal that finds the lease lost ends the listing.
func (c *Checkpointer) listHolding(ctx context.Context, owner string, token int64, interval time.Duration, list func(context.Context) ([]streams.Identity, error)) ([]streams.Identity, error) {
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		// No renewal runs once the listing is published.
		close(done)
		cancel(nil)
		wg.Wait()
	}()
	wg.Go(func() {
		t := time.NewTicker(interval / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			held, err := discoveryRenewScript.Run(lctx, c.client, []string{c.DiscoveryKey()}, owner, token, interval.Milliseconds()).Int64()
			if err == nil && held == 0 {
				cancel(errors.New("the group's discovery lease was lost while listing"))
				return
			}
		}
	})
	found, err := list(lctx)
	if cause := context.Cause(lctx); err != nil && cause != nil && ctx.Err() == nil {
		return nil, cause
	}
	return found, err
}
