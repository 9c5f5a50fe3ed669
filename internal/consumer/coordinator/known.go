package coordinator

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// What an instance knows of the group's state beyond its readers, kept to
// re-seed a store that forgets (reseed.go): the closed shards, the
// operator's start override and each shard's last known position.

// known is what the coordinator knows of the group's state beyond its
// readers. The run goroutine writes it; the renew goroutine reads it.
type known struct {
	mu sync.Mutex
	// closedSet is the shards known closed, each with the lease token its
	// close was made under (0 when unknown: learned from the store while
	// it held no lease of the shard).
	closedSet map[string]int64
	// reopened is the store's Round.Reopened as the last balancing round
	// read it: shards a re-seed won back from a newcomer's close, which
	// nobody has closed since.
	reopened map[string]bool
	override *consumer.StartOverride
	// committed is, per shard, the last checkpoint this instance took a
	// shard from or committed, with the lease token it held then, until a
	// newer owner (or an operator's reset or import) is known or the
	// shard's reader here ends without closing it (gaveUp).
	committed map[string]knownPos
	// forgotten is, per shard, the highest lease token under which this
	// instance forgot the shard's position because a newer owner (or an
	// operator's reset) holds it. A commit made under such a token can
	// have run in the store while the lease was still held and have its
	// reply handled only after the forget; it must not put the position
	// back, where a re-seed after a later wipe would write it over the
	// newer owner's. A take of the shard clears it: no reader of an
	// earlier lease is left by then (a shard is taken only once its last
	// reader here ended).
	forgotten map[string]int64
}

// knownPos is a position this instance knows a shard reached, under the
// lease token it held.
type knownPos struct {
	pos   consumer.Position
	token int64
}

// closed records a shard read to its end and closed by this instance
// under the lease token token.
func (k *known) closed(id string, token int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closedSet == nil {
		k.closedSet = map[string]int64{}
	}
	k.closedSet[id] = max(k.closedSet[id], token)
	delete(k.committed, id)
	// This instance's close took the shard off the store's reopened list
	// (a close is what settles a shard won back), so the next round's
	// merge keeps it even when it read the list before the close.
	delete(k.reopened, id)
}

// noteReopened records the shards a balancing round read as reopened.
func (k *known) noteReopened(ids map[string]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reopened = ids
}

// take records where a taken shard starts and the override the store gave.
// The store's checkpoint replaces what was known, also when it is older or
// none: only an operator's reset moves a checkpoint back.
func (k *known) take(t consumer.Take) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.override = t.Override
	delete(k.forgotten, t.Shard)
	if t.Checkpoint.IsZero() {
		delete(k.committed, t.Shard)
		return
	}
	k.commit(t.Shard, t.Checkpoint, t.Token)
}

// committedTo records a checkpoint a reader of this instance committed
// under the lease token token, unless the position was forgotten under
// that token since (the commit's reply came after the forget).
func (k *known) committedTo(id string, p consumer.Position, token int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t, ok := k.forgotten[id]; ok && token <= t {
		return
	}
	k.commit(id, p, token)
}

func (k *known) commit(id string, p consumer.Position, token int64) {
	if k.committed == nil {
		k.committed = map[string]knownPos{}
	}
	k.committed[id] = knownPos{pos: p, token: token}
}

// newerOwner forgets a shard's position once another owner (or an
// operator's reset) is known to hold the shard: what it commits is newer.
// token is the lease token this instance held: a commit made under it
// whose reply comes later does not put the position back.
func (k *known) newerOwner(id string, token int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgetLocked(id, token)
}

// forgetLocked forgets a shard's position and refuses commits under token
// from then on, until the shard is taken again. k.mu is held.
func (k *known) forgetLocked(id string, token int64) {
	delete(k.committed, id)
	if k.forgotten == nil {
		k.forgotten = map[string]int64{}
	}
	k.forgotten[id] = max(k.forgotten[id], token)
}

// gaveUp forgets the position of a shard whose reader here ended without
// closing it: handed back (or left to lapse), or lost. Its next owner
// takes the shard from the store's checkpoint and knows it from then on.
// Kept here, the position could be written after a later wipe over a
// holder that won the shard back at a re-seed under a token no higher
// than this instance's (tokens start again at 1 after a wipe, so
// superseded cannot tell), which the store would keep as the later one.
func (k *known) gaveUp(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.committed, id)
}

// superseded forgets the positions of shards whose lease the store shows
// under a newer token than the one this instance held: another owner took
// the shard since (after a hand-back, say), or an operator's reset or
// import raised every token. Its checkpoint is then the newer owner's or
// the operator's, which a re-seed must not overwrite.
func (k *known) superseded(leases map[string]consumer.LeaseState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, e := range k.committed {
		if ls, ok := leases[id]; ok && ls.Token > e.token {
			k.forgetLocked(id, e.token)
		}
	}
}

// noteClosed merges the closed set read from the store (checked against
// the group record, so a forgetting store's empty set never gets here)
// into what this instance knows, and returns the union: the gate's closed
// set. A close is never dropped because the store lacks it: another
// instance may have re-seeded a store that forgot the group without that
// close, and dropping it would let the parent be read again after its
// children. missing lists such closes of listed shards, for the caller to
// write back (writeBackClosed) before any other instance takes the parent.
//
// Only an operator's reset or import, or a recreated stream, takes a close
// away: it frees every lease at time 0 with its token raised and writes a
// new closed set. A known close the store lacks is forgotten when the
// shard's lease shows that: freed at time 0 under a higher token than the
// close's, or held under one (taken since, after the reset). A store that
// forgot the group holds no lease of a closed shard (a re-seed restores
// only the leases of shards being read), and its tokens start again from
// 1, so a take after a wipe does not pass for a reset.
//
// A known close of a shard this instance reads now is dropped too: its
// reader won the shard back at a re-seed from a close a newcomer made on
// an emptied store from its own `latest`, and closes it itself at its end.
// So is a known close of a shard the store lists as reopened (the last
// round's Round.Reopened), whoever holds it: another instance's re-seed
// won it back from such a close, which this instance may have learned
// from the store before. Only the store's lists tell that apart from a
// parent taken again after a wipe under a token no higher than its close's
// (whose close is written back): the leases look alike. The shard is then
// not closed in this instance's gate until the store's closed set holds it
// again, so its children wait for the holder's reader to close it.
func (co *coordinator) noteClosed(closed map[string]bool, leases map[string]consumer.LeaseState) (merged map[string]bool, missing []string) {
	readers := co.readersNow()
	co.known.mu.Lock()
	defer co.known.mu.Unlock()
	if co.known.closedSet == nil {
		co.known.closedSet = map[string]int64{}
	}
	for id, tok := range co.known.closedSet {
		if closed[id] {
			continue
		}
		if r := readers[id]; (r != nil && !r.Finished() && !r.Lost()) || co.known.reopened[id] {
			delete(co.known.closedSet, id)
			continue
		}
		if ls, ok := leases[id]; ok && ls.Token > tok && (operatorFreed(ls) || tok > 0) {
			delete(co.known.closedSet, id)
			continue
		}
		if _, listed := co.listed[id]; listed {
			missing = append(missing, id)
		}
	}
	merged = make(map[string]bool, len(co.known.closedSet)+len(closed))
	for id := range closed {
		co.known.closedSet[id] = max(co.known.closedSet[id], leases[id].Token)
	}
	for id := range co.known.closedSet {
		merged[id] = true
	}
	slices.Sort(missing)
	return merged, missing
}

// operatorFreed reports a lease an operator's reset or import (or a
// recreated stream) freed: no owner, released at time 0 (a release or an
// expiry keeps a real time; a close also writes 0, but its shard is in the
// closed set).
func operatorFreed(ls consumer.LeaseState) bool {
	return ls.Owner == "" && ls.Token > 0 && ls.ExpiresAt.UnixMilli() == 0
}

// writeBackClosed writes closes this instance knows back into a store that
// lacks them, through a re-seed that carries nothing else (no checkpoint,
// no lease): the store keeps what it has and adds the closes it takes. It
// takes none over a shard a holder won back at its re-seed (reopened) or
// that it settled otherwise, so the closed set is read back to tell what
// it kept. It returns the closes the store refused: the caller does not
// count them closed in this round's gate, and its next round learns why
// (a reopened shard's close is then dropped).
func (co *coordinator) writeBackClosed(ctx context.Context, missing []string) (refused []string) {
	_, err := co.store.Reseed(ctx, consumer.Seed{Owner: co.c.owner, Checkpoints: map[string]consumer.Position{}, Closed: missing})
	if err != nil {
		co.log.Warnf("Writing back %d closed shards the checkpoint store lacks failed; retrying at the next balancing round: %v", len(missing), err)
		return nil
	}
	now, err := co.store.ClosedShards(ctx)
	if err != nil {
		co.log.Warnf("The checkpoint store lacked the close of %d shards this instance knew closed (%s): another instance re-seeded it without them after it forgot the group. Sent them back; reading back which it kept failed, so the next balancing round checks again: %v",
			len(missing), strings.Join(missing, ", "), err)
		return nil
	}
	var wrote []string
	for _, id := range missing {
		if now[id] {
			wrote = append(wrote, id)
		} else {
			refused = append(refused, id)
		}
	}
	if len(wrote) > 0 {
		co.log.Warnf("The checkpoint store lacked the close of %d shards this instance knew closed (%s): another instance re-seeded it without them after it forgot the group. Wrote them back, so no parent is read again after its children",
			len(wrote), strings.Join(wrote, ", "))
	}
	if len(refused) > 0 {
		co.log.Warnf("The checkpoint store refused the close of %d shards this instance knew closed (%s): a holder won them back at its re-seed after the store forgot the group, and its reader reads them on from its own position, or the store settled them otherwise. Not written back; their children wait until the store holds their close",
			len(refused), strings.Join(refused, ", "))
	}
	return refused
}
