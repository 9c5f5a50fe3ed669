package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
)

// The group's stream discovery: one instance of the group lists the
// streams per interval, under a lease, and writes what it found to one
// hash of the group, which every instance reads.
//
//	<prefix>:{<group>}:streams  HASH
//	  _lease   "<owner>|<expiresAtMillis>|<token>"  who lists this interval
//	  _listed  ms of the last published listing (Redis clock)
//	  _first   ms of the group's first published listing
//	  _format  the layout's version (discoveryFormat)
//	  s:<key>  "<name>|<createdMs>|<status>|<seenMs>|<goneMs>|<appeared>"
//
// <key> is the stream's ARN, as in its own keys. The hash tag is {<group>}
// alone: the hash is the group's, not a stream's, and lives on its own
// Cluster slot; every script touches this one key, and pruning a released
// stream runs one script on the stream's keys (their slot) and another on
// this hash. {<group>} never equals a stream's tag {<group>:<stream>}, and
// `<prefix>:{<group>:*` (a stream key pattern) does not match it.

// discoveryFormat is the layout of the discovery hash this release writes.
const discoveryFormat = 1

// discoveryClaimScript: KEYS streams; ARGV owner, intervalMs. Returns
// {granted, owner, expiresAt, token, listedAt, now}.
var discoveryClaimScript = newScript("discovery_claim")

// discoveryPublishScript: see lua/discovery_publish.lua.
var discoveryPublishScript = newScript("discovery_publish")

// discoveryRenewScript: KEYS streams; ARGV owner, token, intervalMs.
var discoveryRenewScript = newScript("discovery_renew")

// discoveryForgetScript: KEYS streams; ARGV owner, token, key.
var discoveryForgetScript = newScript("discovery_forget")

// discoveryFenceScript: KEYS streams; ARGV owner, token, intervalMs.
// Returns until when (ms) no other instance can claim the lease, 0 when
// another already has.
var discoveryFenceScript = newScript("discovery_fence")

// pruneStreamScript: KEYS the eight keys of a group+stream; ARGV member
// window (ms), fence (ms). Returns 1 deleted, 0 refused (a live lease or
// member), -1 fenced.
var pruneStreamScript = newScript("prune_stream")

// ErrDiscoveryLeaseLost means the caller no longer holds the group's
// discovery lease under its token, or may not by the time its call lands:
// another instance lists the streams now.
var ErrDiscoveryLeaseLost = errors.New("the group's discovery lease was lost")

// DiscoveryKey is the group's discovery hash.
func (c *Checkpointer) DiscoveryKey() string {
	return c.cfg.KeyPrefix + ":{" + c.cfg.Group + "}:streams"
}

// DiscoveryClaim is the answer to ClaimDiscovery.
type DiscoveryClaim struct {
	// Granted: the caller lists the streams now, and publishes under Token.
	Granted bool
	// Holder is who holds the lease ("" when none).
	Holder    string
	ExpiresAt time.Time
	Token     int64
	// ListedAt is when the last listing was published (zero: never).
	ListedAt time.Time
	// Now is the Redis clock.
	Now time.Time
}

// ClaimDiscovery asks for the group's discovery lease: granted when no
// other instance holds it live and the last listing is at least interval
// old, so one instance lists per interval whatever the number of
// instances. The lease lasts interval: a holder that dies before it
// publishes is replaced once it lapses.
func (c *Checkpointer) ClaimDiscovery(ctx context.Context, owner string, interval time.Duration) (DiscoveryClaim, error) {
	out, err := discoveryClaimScript.Run(ctx, c.client, []string{c.DiscoveryKey()}, owner, interval.Milliseconds()).Slice()
	if err != nil {
		return DiscoveryClaim{}, fmt.Errorf("claiming the group's stream discovery: %w", err)
	}
	if len(out) < 6 {
		return DiscoveryClaim{}, fmt.Errorf("claiming the group's stream discovery: short reply %v", out)
	}
	return DiscoveryClaim{
		Granted: toInt(out[0]) == 1, Holder: toString(out[1]), ExpiresAt: millis(toInt(out[2])),
		Token: toInt(out[3]), ListedAt: millis(toInt(out[4])), Now: millis(toInt(out[5])),
	}, nil
}

// millis is a Redis-clock time in ms; 0 is the zero time.
func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// PublishDiscovery writes what the lease holder listed. Streams the last
// listing held and this one lacks are marked gone now; those gone for at
// least retention are returned (their keys), for PruneReleased. published
// is false when the caller no longer holds the lease under token (another
// instance claimed it after it lapsed): nothing was written.
func (c *Checkpointer) PublishDiscovery(ctx context.Context, owner string, token int64, found []streams.Identity, retention time.Duration) (published bool, expired []string, err error) {
	return c.publishDiscovery(ctx, owner, token, found, retention, Discovery{})
}

// publishDiscovery is PublishDiscovery re-seeding a hash that forgot the
// group's first listing (Redis flushed or restarted empty) from seed, the
// publisher's last read of it (lua/discovery_publish.lua).
func (c *Checkpointer) publishDiscovery(ctx context.Context, owner string, token int64, found []streams.Identity, retention time.Duration, seed Discovery) (published bool, expired []string, err error) {
	var first int64
	if !seed.FirstListedAt.IsZero() {
		first = seed.FirstListedAt.UnixMilli()
	}
	args := make([]any, 0, 6+4*len(seed.Streams)+4*len(found))
	args = append(args, owner, token, retention.Milliseconds(), discoveryFormat, first, len(seed.Streams))
	for _, s := range seed.Streams {
		appeared := "0"
		if s.Appeared {
			appeared = "1"
		}
		var seen int64
		if !s.Seen.IsZero() {
			seen = s.Seen.UnixMilli()
		}
		args = append(args, s.Key(), s.Created.UnixMilli(), seen, appeared)
	}
	for _, id := range found {
		args = append(args, id.Key(), id.Name, id.Created.UnixMilli(), string(id.Status))
	}
	out, err := discoveryPublishScript.Run(ctx, c.client, []string{c.DiscoveryKey()}, args...).Slice()
	if err != nil {
		return false, nil, fmt.Errorf("publishing the group's streams: %w", err)
	}
	if len(out) < 2 || toInt(out[0]) != 1 {
		return false, nil, nil
	}
	for _, v := range out[2:] {
		expired = append(expired, toString(v))
	}
	return true, expired, nil
}

// DiscoveredStream is one stream of the group's discovery hash.
type DiscoveredStream struct {
	streams.Identity
	// Seen is when a listing first found this incarnation.
	Seen time.Time
	// Gone is when a listing first lacked it (zero while listed).
	Gone time.Time
	// Appeared: found after the group's first listing, or created again;
	// it starts at new_stream_start_position.
	Appeared bool
}

// Discovery is the group's discovery hash as read.
type Discovery struct {
	// ListedAt is when the last listing was published, FirstListedAt
	// when the group's first was (zero: none yet).
	ListedAt, FirstListedAt time.Time
	// Holder is who holds or last held the lease.
	Holder string
	// Streams are sorted by name, gone ones included.
	Streams []DiscoveredStream
}

// Listed returns the streams of the last listing (not gone).
func (d Discovery) Listed() []DiscoveredStream {
	var out []DiscoveredStream
	for _, s := range d.Streams {
		if s.Gone.IsZero() {
			out = append(out, s)
		}
	}
	return out
}

// ReadDiscovery reads the group's discovery hash (one HGETALL). A hash
// written in a newer layout than this release knows is refused, naming
// both versions.
func (c *Checkpointer) ReadDiscovery(ctx context.Context) (Discovery, error) {
	all, err := c.client.HGetAll(ctx, c.DiscoveryKey()).Result()
	if err != nil {
		return Discovery{}, fmt.Errorf("reading the group's streams: %w", err)
	}
	return parseDiscovery(all)
}

func parseDiscovery(all map[string]string) (Discovery, error) {
	var d Discovery
	if f := toInt(all["_format"]); f > discoveryFormat {
		return d, fmt.Errorf("reading the group's streams: %s holds format %d, this release knows format %d and older; upgrade every instance of the group", "the discovery hash", f, discoveryFormat)
	}
	d.ListedAt, d.FirstListedAt = millis(toInt(all["_listed"])), millis(toInt(all["_first"]))
	d.Holder, _, _ = strings.Cut(all["_lease"], "|")
	for field, v := range all {
		key, ok := strings.CutPrefix(field, "s:")
		if !ok {
			continue
		}
		// The name holds no '|'; the numbers are taken from the right.
		p := strings.Split(v, "|")
		if len(p) != 6 {
			return d, fmt.Errorf("reading the group's streams: entry %s is %q, not name|created|status|seen|gone|appeared", key, v)
		}
		created, _ := strconv.ParseInt(p[1], 10, 64)
		seen, _ := strconv.ParseInt(p[3], 10, 64)
		gone, _ := strconv.ParseInt(p[4], 10, 64)
		d.Streams = append(d.Streams, DiscoveredStream{
			Identity: streams.Identity{Name: p[0], ARN: key, Created: time.UnixMilli(created), Status: types.StreamStatus(p[2])},
			Seen:     millis(seen), Gone: millis(gone), Appeared: p[5] == "1",
		})
	}
	slices.SortFunc(d.Streams, func(a, b DiscoveredStream) int { return strings.Compare(a.Name, b.Name) })
	return d, nil
}

// PruneReleased deletes the keys of a stream the group released longer
// ago than the retention (a key PublishDiscovery returned), then drops its
// entry from the discovery hash, under the caller's discovery lease token.
// It refuses (pruned false) while a lease of the stream is live or a
// member heartbeat within the lease period: an instance still reads it.
// The stream's keys and the discovery hash lie on different Cluster
// slots, so no one script checks the token and deletes. The token is
// checked first (discovery_fence), which also gives the time before which
// no other instance can claim the lease under interval; the deletion is
// refused from then on (prune_stream). A caller paused between its
// listing and its prune, whose lease another instance may have claimed
// meanwhile and found the stream again with, deletes nothing: it gets
// ErrDiscoveryLeaseLost. The two scripts may run on two Cluster nodes and
// the fence has no margin: a stream node's clock behind the discovery
// node's by d lets the deletion land up to d after another instance could
// claim. So this holds while their clocks agree, and while every instance
// of the group has the same interval.
func (c *Checkpointer) PruneReleased(ctx context.Context, owner string, token int64, interval time.Duration, key string) (pruned bool, err error) {
	until, err := discoveryFenceScript.Run(ctx, c.client, []string{c.DiscoveryKey()}, owner, token, interval.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("checking the group's discovery lease before pruning released stream %s: %w", key, err)
	}
	if until == 0 {
		return false, fmt.Errorf("pruning released stream %s: %w", key, ErrDiscoveryLeaseLost)
	}
	s := c.Stream(key)
	k := s.keys
	n, err := pruneStreamScript.Run(ctx, c.client,
		[]string{k.Checkpoints, k.Closed, k.Leases, k.Members, k.Handoff, k.Progress, k.Epoch, k.Delivered}, s.periodMillis(), until).Int64()
	if err != nil {
		return false, fmt.Errorf("pruning the keys of released stream %s: %w", key, err)
	}
	if n == -1 {
		return false, fmt.Errorf("pruning released stream %s: %w", key, ErrDiscoveryLeaseLost)
	}
	if n != 1 {
		return false, nil
	}
	if err := discoveryForgetScript.Run(ctx, c.client, []string{c.DiscoveryKey()}, owner, token, key).Err(); err != nil {
		return true, fmt.Errorf("dropping released stream %s from the group's streams: %w", key, err)
	}
	return true, nil
}
