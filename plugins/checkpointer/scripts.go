package checkpointer

import (
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every mutation of the checkpointer's keys is one of these scripts, so that
// each is atomic, sees the Redis server's clock (TIME) and, with every key in
// KEYS under one hash tag, runs on a single Cluster slot. Script.Run sends
// EVALSHA and falls back to EVAL after a restart flushed the script cache.
//
// Lease value: "<owner>|<expiresAtMillis>|<fencingToken>". A released lease
// keeps its field as "|<releasedAtMillis>|<token>" so the token never goes
// back (every acquisition takes the previous token plus one) and the next
// holder knows how long the shard has been unread (see acquireScript). A
// closed shard's or a reset's released lease has 0 there.
//
// Each script's body is a file in lua/ named for it; lua/prelude.lua holds
// the helpers every script shares and is joined in front of each body here,
// so Redis sees one self-contained script. The Go constants a body needs
// (hash field names) stand in it as {{name}} and are filled in here too, so
// the name of a field is written once.

// luaFiles holds the prelude and one body per script.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// luaPrelude holds the helpers every script shares: the Redis clock, lease
// values, the group epoch check and position comparison.
var luaPrelude = luaFields.Replace(readLua("prelude"))

// luaFields fills in the Go constants the bodies refer to.
var luaFields = strings.NewReplacer(
	"{{startField}}", startField,
	"{{shardStartPrefix}}", shardStartPrefix,
	"{{streamCreatedField}}", streamCreatedField,
	"{{formatField}}", formatField,
	"{{createdField}}", createdField,
	"{{reseededField}}", reseededField,
	"{{prunedField}}", prunedField,
	"{{provisionalField}}", provisionalField,
	"{{settledField}}", settledField,
	"{{reopenedField}}", reopenedField,
	"{{shardStartPrefix}}", shardStartPrefix,
)

// embeddedScript is one script with the source it was made from.
type embeddedScript struct {
	src    string
	script *redis.Script
}

// scripts names every script by its file, for the test that loads each one.
var scripts = map[string]embeddedScript{}

// newScript returns the script whose body is lua/<name>.lua, joined to the
// prelude. A change to the prelude or a body changes the SHA1 Redis caches
// the script under; during a rolling upgrade each release then loads its
// own copy (Script.Run falls back to EVAL once), which costs nothing else:
// a script's behaviour depends only on its source.
func newScript(name string) *redis.Script {
	src := mutate(name, "\n"+luaPrelude+"\n"+luaFields.Replace(readLua(name)))
	s := redis.NewScript(src)
	scripts[name] = embeddedScript{src: src, script: s}
	return s
}

// readLua returns an embedded file. Its absence is a build mistake the first
// test shows, so it panics at init rather than return an error.
func readLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("reading embedded Lua script %s: %v", name, err))
	}
	return string(b)
}

// acquireScript: KEYS lease, handoff, ckpt, epoch, delivered; ARGV owner,
// periodMillis, knownEpoch, newEpoch, holdMillis, then one or more shards.
// A caller that knows no epoch yet joins the group, creating its record (id
// newEpoch, start and created now) if there is none (the input joins
// first, join.go, and waits while a record is young and not re-seeded).
// Each shard is taken in turn as a call of its own would take it.
// Returns {now, epoch, groupStart}, then per shard {1|0, owner, expiresAt,
// token, checkpoint, startOverride, quietMillis, delivered, shardStart}: 1
// when the caller holds the lease, 0 with the live holder otherwise (also
// when that holder is owner: a live lease is never taken, instance.go).
// The checkpoint, the override, the redelivery mark and, for a shard
// without a checkpoint, its own start (empty when none) come with the lease,
// so a take is one round trip, and a balancing round's takes one for
// many. For holdMillis after a re-seed (consumer.RestartWait: a lease
// period and the newcomer wait), a shard whose lease the store does not
// know is not handed out (0 with owner ”): its holder may not have
// re-seeded it yet.
var acquireScript = newScript("acquire")

// renewScript: KEYS lease, epoch; ARGV shard, owner, token, periodMillis,
// epoch. Returns {1, expiresAt, now} or {0, 0, now} when fenced. An expired
// lease nobody took is still the caller's: its token proves no one else held
// it. A lease the store does not know at all means it forgot (FORGOT).
var renewScript = newScript("renew")

// renewAllScript: KEYS lease, epoch; ARGV owner, periodMillis, epoch, then
// shard, token pairs. Returns {expiresAt, now, lostShard...}; FORGOT when
// the epoch differs or a presented lease is unknown to the store.
var renewAllScript = newScript("renew_all")

// renewStreamsScript: KEYS lease, epoch pairs of several streams; ARGV
// owner, periodMillis, then per stream epoch, n and n shard, token pairs.
// Returns per stream {1, expiresAt, now, lostShard...} or {0, foundEpoch}
// when the store forgot it. Only outside a Cluster (Store.RenewStreams).
var renewStreamsScript = newScript("renew_streams")

// releaseScript: KEYS lease, handoff, epoch; ARGV shard, owner, token,
// epoch. Returns 1, or 0 when fenced. Releasing twice is not an error.
var releaseScript = newScript("release")

// commitScript: KEYS lease, ckpt, epoch; ARGV shard, owner, token,
// position, epoch. Returns 1 written, 2 not written because the stored one
// is not older, 0 fenced. A commit already done writes the stored value
// again: with replicas to wait for, the WAIT that follows on the same
// connection then counts from this write, which comes after every earlier
// one (a retry may run on another pooled connection, whose own last write
// could be older than the one the replicas must hold).
var commitScript = newScript("commit")

// closeScript: KEYS lease, ckpt, closed, handoff, epoch; ARGV shard, owner,
// token, epoch. Returns 1, 2 when the shard stays provisional
// (reseed.lua: closed under a lease a re-seed of a record that lost kept),
// or 0 when fenced. Running it again after it
// succeeded returns 1 (the close waits for replicas and may be retried),
// and writes SHARD_END again so that the WAIT after it covers the close
// (see commitScript).
var closeScript = newScript("close")

// closedScript: KEYS closed, epoch; ARGV epoch (” to skip the check).
// Returns {the closed set, the provisional shards (" a b ... ",
// reseed.lua)}; FORGOT when the caller's epoch is gone, so a
// forgetting store's empty set is never taken for the group's.
var closedScript = newScript("closed")

// groupScript: KEYS epoch; ARGV epoch (” to skip the check). Returns 1, or
// FORGOT when the caller's group record is gone or replaced: the check an
// instance that reads shards makes every second (consumer.watchGroup).
var groupScript = newScript("group")

// groupsScript: KEYS the epochs of several streams; ARGV the epoch each
// caller knows (” to skip). Returns per stream 1, or the id the record
// holds (” when gone). Only outside a Cluster (Store.CheckGroups).
var groupsScript = newScript("groups")

// reseedScript: KEYS epoch, ckpt, closed, lease, delivered, handoff; ARGV epochId,
// groupStart, owner, periodMillis, nCheckpoints, startOverride (” for
// none), streamCreated (ms, ” when unknown), then nCheckpoints shard, position pairs, nClosed, nClosed shards,
// nDelivered, nDelivered shard, position pairs (redelivery marks, written
// only forwards), then shard, token pairs of the caller's leases. It writes back what a store that
// forgot lost, as one instance knew it: the group record (the earlier
// start wins, so two instances that disagree converge on one), the
// creation time of the stream the checkpoints belong to (if none is
// recorded, or a later one than recorded, whose seed first clears what
// seeds of the deleted stream wrote; a seed of an earlier one than
// recorded writes no position, closed shard or lease: a stream deleted and
// created again is told apart whatever order the instances re-seed in),
// checkpoints
// (only forwards), the start override (if none), closed shards, and the
// caller's leases with their tokens (so commits in flight stay valid),
// unless another owner took one meanwhile (the store holds a newer token;
// an older one, even live, was fenced by the caller's take and gives way;
// an equal one goes to the caller when its group record is the one now
// stored: the other was handed out from the record it replaced, after a
// wipe started the tokens again, and the caller's position then replaces
// the other owner's checkpoint) or the reader is done with it (the shard is closed, or the lease was
// released under the caller's token): a closed shard keeps SHARD_END, stays
// closed and gets no lease. It marks the group re-seeded now: for a lease
// period, shards whose lease the store does not know are not handed out;
// not for a seed of closes alone on a store that kept the caller's record
// (a close written back), which must not pause new shards.
// Returns {epochId, groupStart, foundId, expiresAt, now, nLost,
// lostShard..., doneShard...}.
var reseedScript = newScript("reseed")

// leasesScript: KEYS lease. Returns {now, field, value, ...}; a script so the
// expiry is judged by the same clock the mutations use.
var leasesScript = newScript("leases")

// heartbeatScript: KEYS members; ARGV member. Returns now.
var heartbeatScript = newScript("heartbeat")

// heartbeatsScript: KEYS the members keys of several streams; ARGV member.
// Returns now. Only outside a Cluster (Store.HeartbeatAll).
var heartbeatsScript = newScript("heartbeats")

// liveMembersScript: KEYS members; ARGV periodMillis. Prunes members silent
// for longer than the period and returns the rest.
var liveMembersScript = newScript("live_members")

// removeMemberScript: KEYS members; ARGV member.
var removeMemberScript = newScript("remove_member")

// requestHandoffScript: KEYS handoff; ARGV requester, then one or more
// shards, each asked for as of now.
// Value: "<requester>|<requestedAtMillis>".
var requestHandoffScript = newScript("request_handoff")

// handoffRequestsScript: KEYS handoff, lease, members; ARGV owner,
// periodMillis, the requests' max age (ms). Returns {shard, requester, ...}
// for live shards the owner holds whose requester is a live member;
// requests from dead members are deleted, so a vanished requester never
// makes an owner give a shard up, and so are requests older than the max
// age, which their requesters no longer wait for.
var handoffRequestsScript = newScript("handoff_requests")

// roundScript: KEYS members, closed, epoch, lease, handoff; ARGV
// periodMillis, epoch (” to skip the check), owner, the hand-off
// requests' max age (ms). Returns {members,
// closed, {now, shard, lease...}, {shard, requester...}, reseeded,
// reopened, provisional}, or FORGOT (Store.ReadRound).
var roundScript = newScript("round")

// roundsScript: round.lua over the keys of several streams (Store.ReadRounds).
var roundsScript = newScript("rounds")

// resetScript: KEYS ckpt, closed, lease, handoff; ARGV force ("1"/"0"),
// start marker ("" for none), keep ("1": the start override and per-shard
// starts not given stay), the number of expected checkpoints (-1: none)
// and those shard, position pairs, then shard, position pairs. Refuses with
// {0, liveShard...} while leases are live unless forced, and with {2} when
// the stored checkpoints are not the expected ones (a reader committed
// since the caller read them); otherwise frees every lease with its token
// bumped (a reader still running is fenced out of its next renew or
// commit), replaces the checkpoints and the closed set and returns
// {1, liveShard...}.
var resetScript = newScript("reset")

// deleteScript: KEYS ckpt, closed, lease, members, handoff, progress,
// epoch, delivered; ARGV force, member window (ms). Refuses with {-1, member...} while
// members heartbeat within the window, forced or not (they would re-seed
// what they know at once); then the same refusal as resetScript; then
// deletes every key of the group+stream, the group record included: the
// next take starts a new one.
var deleteScript = newScript("delete")

// publishProgressScript: KEYS progress, lease; ARGV owner, then shard,
// lagMillis, lastDeliveredMillis, bytesPerSecond quadruples. Value:
// "<lagMillis>|<lastDeliveredMillis>|<owner>|bps=<bytesPerSecond>" (the
// load trails, so a release that knows only the first three fields still
// reads the value; it shows the load as part of the owner). Only shards whose lease names
// the owner are written, so an instance that lost a shard does not
// overwrite what its new owner published. Returns the number written.
var publishProgressScript = newScript("publish_progress")

// publishProgressesScript: KEYS progress, lease pairs of several streams;
// ARGV owner, then per stream n and n shard, lag, last, bps quadruples.
// Only outside a Cluster (Store.PublishProgressAll).
var publishProgressesScript = newScript("publish_progresses")

// nowScript returns the Redis clock in milliseconds.
var nowScript = newScript("now")
