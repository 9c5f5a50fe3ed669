package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Streams found while the consumer runs. The streams named in the config
// are started by Start and read until Close, as always. Follow adds the
// streams that discovery found (the patterns of `streams`) and removes
// those it no longer finds, each with its own coordinator, so a stream
// comes and goes without touching the others: a new one is described,
// joins its group's state and its shards are leased and balanced as at a
// start; a removed one stops as at a shutdown, for that stream only (its
// readers stop fetching, wait for their in-flight batches, commit and
// release, and this instance leaves the stream's members). A stream
// deleted and created again under its name (same key, another creation
// time) is removed and added again: a fresh coordinator, whose first
// check of the group record (recreated.go) clears the deleted stream's
// state.

// Found is a stream to read, as discovery found it.
type Found struct {
	// Name is what the stream is described by (the listing's name).
	Name string
	// Key is the stream's identity, its checkpoints' key: the ARN, or the
	// name where the service gives no ARN.
	Key string
	// Created is its creation time (zero when the service gives none);
	// another value under the same Key is a new stream.
	Created time.Time
	// Start is where its shards without a checkpoint start: one of
	// start_position's values (new_stream_start_position resolved by
	// streams.Config.StartFor).
	Start string
}

// followed is a stream added by Follow.
type followed struct {
	co      *coordinator
	created time.Time
}

// replacedBy says whether a listing with this creation time names a later
// incarnation of the stream than the one read. A coordinator that finds
// its stream created again takes the new incarnation on itself
// (sameStream, adoptCreated), so the listings after that, and a stale
// listing from before the deletion, restart nothing: a restart then
// stopped readers already reading the new stream and read it again from
// its start, unmarked when a Redis wipe had taken the marks (seed 7, 1 h,
// soak-dyn-2#4).
func (fs *followed) replacedBy(created time.Time) bool { return created.After(fs.created) }

// adoptCreated records that co, a followed stream's coordinator, now reads
// the incarnation created at created.
func (c *Consumer) adoptCreated(co *coordinator, created time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fs, ok := c.followed[co.id]; ok && fs.co == co && created.After(fs.created) {
		fs.created = created
	}
}

// Follow makes the streams the consumer reads, besides the named ones,
// exactly found: it removes the followed streams found lacks or found with
// a later creation time than the one read (followed.replacedBy), then adds
// those not yet read, a few at a time
// (follow_limit.go). A stream also named in the config is read by its
// named coordinator and skipped here. Every stream is tried: the error
// joins the ones that failed (a failed add is tried again by the next
// Follow).
func (c *Consumer) Follow(ctx context.Context, found []Found) error {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	want := map[string]Found{}
	for _, f := range found {
		want[f.Key] = f
	}
	c.mu.Lock()
	var gone []string
	for key, fs := range c.followed {
		if f, ok := want[key]; !ok || fs.replacedBy(f.Created) {
			gone = append(gone, key)
		}
	}
	c.mu.Unlock()
	slices.Sort(gone)
	var wg sync.WaitGroup
	for _, key := range gone {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.removeStream(ctx, key, want[key])
		}()
	}
	wg.Wait()
	// Adds run a few at a time (follow_limit.go): each describes its
	// stream and joins the group's state before its shards are leased.
	var (
		errMu sync.Mutex
		errs  []error
		sem   = make(chan struct{}, followAddConcurrency)
	)
	for _, f := range addOrder(found, c.Owner()) {
		if want[f.Key] != f {
			continue // listed twice: added once, as the last listing
		}
		delete(want, f.Key)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.addStream(ctx, f); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// AddStream starts reading one stream found while the consumer runs. A
// stream already read (named, or followed with this creation time) is left
// as it is.
func (c *Consumer) AddStream(ctx context.Context, f Found) error {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	return c.addStream(ctx, f)
}

// RemoveStream stops reading a stream added by AddStream or Follow, as a
// shutdown does for that stream alone. A named stream is not removed.
func (c *Consumer) RemoveStream(ctx context.Context, key string) {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	c.removeStream(ctx, key, Found{})
}

// FollowedStreams returns the keys of the streams added by Follow, sorted.
func (c *Consumer) FollowedStreams() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k := range c.followed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readingKey reports whether a coordinator reads the stream key: a named
// one, or a followed one with this creation time.
func (c *Consumer) readingKey(key string, created time.Time) bool {
	if fs, ok := c.followed[key]; ok {
		return !fs.replacedBy(created)
	}
	for _, co := range c.coords {
		if co.id == key {
			return true
		}
	}
	return false
}

func (c *Consumer) addStream(ctx context.Context, f Found) error {
	c.mu.Lock()
	if fs, ok := c.followed[f.Key]; ok && fs.replacedBy(f.Created) {
		// Another incarnation of the stream is read: stop it first.
		c.mu.Unlock()
		c.removeStream(ctx, f.Key, f)
		c.mu.Lock()
	}
	switch {
	case !c.started || c.closed:
		c.mu.Unlock()
		return fmt.Errorf("stream %s: the consumer is not running", f.Name)
	case c.readingKey(f.Key, f.Created):
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	co, err := newFoundCoordinator(ctx, c, f)
	if err != nil {
		return err
	}
	co.found = true
	if f.Start != "" {
		co.start = f.Start
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("stream %s: the consumer closed while the stream was added", f.Name)
	}
	if co.id != f.Key && c.readingKey(co.id, co.created) {
		// Listed under another key than it describes to (an emulator
		// without ARNs): read once.
		return nil
	}
	if c.followed == nil {
		c.followed = map[string]*followed{}
	}
	c.followed[f.Key] = &followed{co: co, created: f.Created}
	c.coords = append(c.coords, co)
	c.metrics.Streams.Set(int64(len(c.coords)))
	runCtx := c.runCtx
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		co.run(runCtx)
	}()
	c.log.Infof("Reading stream %s (%s), found by the patterns of streams: its shards without a checkpoint start at %s", co.streamName, co.id, co.start)
	return nil
}

// removal is a followed stream being removed: Close ends its readers when
// it ends the other streams' (cutReaders, marksReserve before its
// deadline, so that the marks of the leases left to lapse are still
// written back), cuts it short at its own deadline (cancel) and waits for
// it to end (done).
type removal struct {
	cutReaders context.CancelFunc
	cancel     context.CancelFunc
	done       chan struct{}
}

// removeStream stops a followed stream gracefully. next is what replaces
// it (its Key is empty when the stream is gone), for the log line.
func (c *Consumer) removeStream(ctx context.Context, key string, next Found) {
	// The hand-off's wait for in-flight batches, then a lease period for
	// the final commits. The removal is not cancelled with ctx (a
	// discovery that ends must not leave the stream's leases to lapse),
	// but a Close that comes meanwhile bounds it by its own deadline
	// (stop.go): the stop stops the other streams at once, beside this
	// removal, rather than after it.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.HandoffTimeout+c.cfg.LeasePeriod)
	defer cancel()
	cut, cutReaders := context.WithCancel(sctx)
	defer cutReaders()
	c.mu.Lock()
	fs, ok := c.followed[key]
	rm := &removal{cutReaders: cutReaders, cancel: cancel, done: make(chan struct{})}
	if ok {
		delete(c.followed, key)
		c.coords = slices.DeleteFunc(c.coords, func(co *coordinator) bool { return co == fs.co })
		c.metrics.Streams.Set(int64(len(c.coords)))
		if c.removing == nil {
			c.removing = map[*coordinator]*removal{}
		}
		c.removing[fs.co] = rm
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	defer func() {
		c.mu.Lock()
		delete(c.removing, fs.co)
		c.mu.Unlock()
		close(rm.done)
	}()
	began := time.Now()
	t := fs.co.shutdownCut(sctx, cut)
	why := "deleted, or no longer matching the patterns of streams and stream_tags"
	if next.Key != "" {
		why = fmt.Sprintf("deleted and created again (now created at %v): read again as a new stream", next.Created.UTC().Format(time.RFC3339))
	}
	took := time.Since(began).Round(time.Millisecond)
	if len(t.unreleased) == 0 && len(t.unacked) == 0 {
		c.log.Infof("Stopped reading stream %s (%s): %s; committed and released %d shards in %v", fs.co.streamName, key, why, t.released, took)
		return
	}
	var parts []string
	parts = append(parts, t.unackedParts(c.cfg.HandoffTimeout)...)
	if len(t.unreleased) > 0 {
		parts = append(parts, fmt.Sprintf("%s could not commit the final checkpoint and lapse after lease.period", shardList(t.unreleased)))
	}
	c.log.Infof("Stopped reading stream %s (%s): %s; committed and released %d of %d shards in %v; %s", fs.co.streamName, key, why, t.released, t.released+len(t.unreleased), took, strings.Join(parts, "; "))
}
