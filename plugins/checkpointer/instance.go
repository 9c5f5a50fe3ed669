package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// One process per instance id. Leases, members and hand-off requests name
// their holder by instance id, so two processes started under one
// lease.instance_id (a fixed id in a shared ConfigMap or compose file)
// would both pass for the holder of every lease the id holds, and both
// read the same shards. Each process therefore claims its id in the
// group's instances hash (<prefix>:{<group>}:instances, id ->
// "<nonce>|<lastBeatMillis>") under a random nonce of its own before it
// joins any stream, and beats there every third of the lease period:
//
//   - a claim that finds the id beating under another nonce waits: if
//     that beat moves on, another process runs under the id and this one
//     is refused (ErrInstanceIDInUse, an error naming the id); if it stays
//     put for a lease period, its process died (a restart right after a
//     crash, a pod rescheduled under its name) and this one takes the id
//     over. A process that stopped gracefully gave its id up (Release),
//     so its restart claims at once; but a claim that saw the id beating
//     and then finds it gone waits until that beat would have lapsed, as
//     Redis forgetting (restarted empty, flushed) under a running process
//     looks the same, and that process beats again before then;
//   - a beat that finds the id claimed by another nonce beating within a
//     lease period means this process stopped beating for a lease period
//     (paused, cut off) and a new process took the id over: this one must
//     stop (InstanceClaim.Lost). Another nonce whose beat lapsed is no
//     running process (an entry Redis kept from an older snapshot): the
//     beat writes over it.
//
// The leases themselves are fenced per process too: a take never takes a
// live lease, even one held under the taker's own id (acquire.lua), so a
// new process under an id waits for the old process's leases to run out
// and takes them with a new fencing token, which refuses the old
// process's renewals and commits.

// ErrInstanceIDInUse means another running process of the group claimed
// the same instance id.
var ErrInstanceIDInUse = errors.New("instance id in use by another process")

// instanceScript: KEYS instances; ARGV id, nonce, periodMillis, mode
// ("claim" or "keep"), the other process's beat a claim saw (0: none).
// Returns {1, nonce, beat, now} when the caller holds
// the id, else {0, holderNonce, holderBeat, now}.
var instanceScript = newScript("instance")

// leaveInstanceScript: KEYS instances; ARGV id, nonce. Gives the id up if
// the caller still holds it.
var leaveInstanceScript = newScript("leave_instance")

// InstancesKey is the group's hash of the instance ids its running
// processes claimed (its own hash tag: the group's, not a stream's).
func (c *Checkpointer) InstancesKey() string {
	return c.cfg.KeyPrefix + ":{" + c.cfg.Group + "}:instances"
}

// InstanceClaim is this process's claim on its instance id, kept alive by
// a beat every third of the lease period until Release.
type InstanceClaim struct {
	c         *Checkpointer
	id, nonce string
	lost      chan struct{}
	lostErr   error
	stop      chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
}

// claimAnswer is the instance script's reply.
type claimAnswer struct {
	held      bool
	holder    string
	beat, now int64
}

func (c *Checkpointer) runInstance(ctx context.Context, id, nonce, mode string, seenBeat int64) (claimAnswer, error) {
	res, err := instanceScript.Run(ctx, c.client, []string{c.InstancesKey()}, id, nonce, c.cfg.LeasePeriod.Milliseconds(), mode, seenBeat).Slice()
	if err != nil {
		return claimAnswer{}, err
	}
	if len(res) != 4 {
		return claimAnswer{}, fmt.Errorf("unexpected script reply %v", res)
	}
	return claimAnswer{held: toInt(res[0]) == 1, holder: toString(res[1]), beat: toInt(res[2]), now: toInt(res[3])}, nil
}

// ClaimInstance claims id for this process in the group, waiting up to
// about a lease period when another process's claim on it is still
// recent, and keeps the claim until Release. It returns an error wrapping
// ErrInstanceIDInUse, naming the id, when another process runs under it.
func (c *Checkpointer) ClaimInstance(ctx context.Context, id string) (*InstanceClaim, error) {
	if err := c.checkInstancePermissions(ctx); err != nil {
		return nil, fmt.Errorf("claiming instance id %s in group %s: %w", id, c.cfg.Group, err)
	}
	period := c.cfg.LeasePeriod
	nonce := newEpochID()
	var first claimAnswer
	waited := time.Now()
	for {
		a, err := c.runInstance(ctx, id, nonce, "claim", first.beat)
		if err != nil {
			return nil, fmt.Errorf("claiming instance id %s in group %s: %w", id, c.cfg.Group, err)
		}
		if a.held {
			if first.holder != "" {
				c.log.Infof("Took over instance id %s in group %s: the process that ran under it stopped beating %v ago (a restart after a crash)", id, c.cfg.Group, time.Duration(a.now-first.beat)*time.Millisecond)
			}
			ic := &InstanceClaim{c: c, id: id, nonce: nonce, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			go ic.keep()
			return ic, nil
		}
		switch {
		case a.holder == "":
			// The process seen under the id gave it up, or Redis forgot
			// it: wait until its beat would have lapsed (instance.lua).
		case first.holder == "":
			first = a
			c.log.Infof("Instance id %s is claimed in group %s by another process that beat %v ago: waiting up to %v for that beat to lapse (a restart after a crash) before taking the id over",
				id, c.cfg.Group, time.Duration(a.now-a.beat)*time.Millisecond, period)
		case a.holder != first.holder || a.beat > first.beat || time.Since(waited) > 2*period:
			return nil, fmt.Errorf("lease.instance_id %q is in use by another running process of group %s (its last beat %v ago): two processes under one id would both read the same shards; give each copy its own lease.instance_id (e.g. the pod name), or leave it empty for a generated one: %w",
				id, c.cfg.Group, time.Duration(a.now-a.beat)*time.Millisecond, ErrInstanceIDInUse)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("claiming instance id %s in group %s: %w", id, c.cfg.Group, ctx.Err())
		case <-time.After(period / 6):
		}
	}
}

// Lost is closed when another process took the id over; Err then says why.
func (ic *InstanceClaim) Lost() <-chan struct{} { return ic.lost }

// Stopped is closed once the claim no longer beats: it was lost or
// released.
func (ic *InstanceClaim) Stopped() <-chan struct{} { return ic.done }

// Err is why the claim was lost (nil while it holds).
func (ic *InstanceClaim) Err() error {
	select {
	case <-ic.lost:
		return ic.lostErr
	default:
		return nil
	}
}

// keep beats every third of the lease period until Release, or until a
// beat finds the id claimed by another process. A beat that fails (Redis
// away) is tried again at the next tick: the leases' own renewals decide
// what an outage costs.
func (ic *InstanceClaim) keep() {
	defer close(ic.done)
	period := ic.c.cfg.LeasePeriod
	t := time.NewTicker(period / 3)
	defer t.Stop()
	for {
		select {
		case <-ic.stop:
			return
		case <-t.C:
		}
		// The beat outlives the Connect that claimed the id (Release ends
		// it), so each is bounded on its own, as a renewal is.
		ctx, cancel := context.WithTimeout(context.Background(), period/6)
		a, err := ic.c.runInstance(ctx, ic.id, ic.nonce, "keep", 0)
		cancel()
		if err != nil {
			ic.c.log.Debugf("Beating under instance id %s failed; tried again in %v: %v", ic.id, period/3, err)
			continue
		}
		if !a.held {
			ic.lostErr = fmt.Errorf("lease.instance_id %q of group %s was taken over by another process while this one did not beat for a lease period (paused or cut off from Redis); this process stops, as two processes under one id would both read the same shards: %w",
				ic.id, ic.c.cfg.Group, ErrInstanceIDInUse)
			close(ic.lost)
			return
		}
	}
}

// Release stops the beat and gives the id up, unless another process took
// it over. It is idempotent, and does nothing on a nil claim.
func (ic *InstanceClaim) Release(ctx context.Context) error {
	if ic == nil {
		return nil
	}
	var err error
	ic.stopOnce.Do(func() {
		close(ic.stop)
		<-ic.done
		if ic.Err() != nil {
			return
		}
		if e := leaveInstanceScript.Run(ctx, ic.c.client, []string{ic.c.InstancesKey()}, ic.id, ic.nonce).Err(); e != nil {
			err = fmt.Errorf("giving up instance id %s in group %s: %w", ic.id, ic.c.cfg.Group, e)
		}
	})
	return err
}

// checkInstancePermissions tries the commands of the instance scripts on
// scratch keys beside the group's instances hash, so that a Redis user
// without one fails the input's connection naming what it lacks, as the
// stream keys' check does, rather than with a refused script.
func (c *Checkpointer) checkInstancePermissions(ctx context.Context) error {
	base := c.cfg.KeyPrefix + ":{" + c.cfg.Group + "}:permission-check:"
	refused, err := permissionsScript.Run(ctx, c.client, []string{base + "hash", base + "set", base + "zset"},
		toAnys(scriptCommands([]string{"instance", "leave_instance"}))...).StringSlice()
	if err != nil {
		var pe *PermissionError
		if errors.As(err, &pe) && pe.Key {
			return fmt.Errorf("checking the Redis user's permissions on the group's instances hash %s: the user's key patterns do not cover it; add the key pattern ~%s to the user (%s): %w",
				c.InstancesKey(), discoveryKeyPattern(c.cfg.KeyPrefix, c.cfg.Group), aclDocs, err)
		}
		return fmt.Errorf("checking the Redis user's permissions: %w", err)
	}
	if len(refused) > 0 {
		return &PermissionError{Command: strings.Join(refused, ", "), Reply: fmt.Errorf("checked at the start, on %s*", base)}
	}
	return nil
}
