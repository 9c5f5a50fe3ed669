package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// FormatVersion is the format of the group's keys this release writes and
// reads, kept in the group record's `format` field. 1 is the first
// release's (no field); 2 adds the record's `created` time, which tells a
// group record that a take created after Redis came back empty from one a
// re-seed restored. Every change of a format is additive: a release reads
// and keeps the fields of the formats before its own, so adjacent releases
// run side by side on one group; an instance refuses a store written in a
// newer format than it knows.
const FormatVersion = 2

// Fields of the group record (the epoch hash) beyond id and start.
const (
	formatField   = "format"
	createdField  = "created"
	reseededField = "reseeded"
	// prunedField lists the shards pruned lately, " a b ... " (prune.lua).
	prunedField = "pruned"
)

// joinScript: KEYS epoch; ARGV newEpoch, format. Creates the group record
// (id newEpoch, start and created now, the format) when there is none, and
// marks an older record with the format if it has none. Returns {now,
// created, reseeded, id, start} (0 for a field the record lacks), or an
// error reply "FORMAT <n>" when the record was written in a newer format
// than the caller's.
var joinScript = newScript("join")

// ErrFormatTooNew means the group's keys were written by a newer release
// in a format this one does not know.
var ErrFormatTooNew = errors.New("checkpoint store written in a newer format")

// Join reads the group record before the instance's first take, creating
// it when there is none, learns its id, and returns how long to wait
// before taking any shard. A record created less than
// consumer.NewcomerWait ago, which no re-seed has marked, may be one a
// newcomer created in a Redis that just came back empty while the group's
// other instances still read their shards: each of them checks the record
// every consumer.GroupCheckInterval and re-seeds once it finds it replaced
// (their renewals find it too, later), and taking before then could start
// a shard later than where its reader got to. A brand-new group cannot be
// told apart from that, so its first instance waits too: two check
// intervals (2 s with the default lease period), not a lease period. A
// record written in a newer format than FormatVersion is refused. The
// store learns the record's id here, so every later call, a standby's
// first take included, presents it: a store that came back empty then
// answers "forgot" rather than creating a fresh record and handing out
// shards that holders still read. First it tries every command the
// input's scripts call (permission_check.go): a Redis user that lacks one
// is refused here, by a PermissionError naming them all.
func (s *Store) Join(ctx context.Context) (time.Duration, error) {
	if err := s.checkInputPermissions(ctx); err != nil {
		return 0, fmt.Errorf("joining group %s: %w", s.c.cfg.Group, err)
	}
	res, err := joinScript.Run(ctx, s.c.client, []string{s.keys.Epoch}, newEpochID(), FormatVersion).Slice()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.HasPrefix(re.Error(), "FORMAT ") {
			theirs, _ := strconv.Atoi(strings.TrimPrefix(re.Error(), "FORMAT "))
			return 0, fmt.Errorf("joining group %s: its checkpoint store (%s) was written in format %d, newer than format %d that this release knows; upgrade this instance to the release the other instances run, or use another checkpoint.group or key_prefix: %w",
				s.c.cfg.Group, s.keys.Epoch, theirs, FormatVersion, ErrFormatTooNew)
		}
		return 0, fmt.Errorf("joining group %s: %w", s.c.cfg.Group, err)
	}
	if len(res) != 5 || toString(res[3]) == "" {
		return 0, fmt.Errorf("joining group %s: unexpected script reply %v", s.c.cfg.Group, res)
	}
	now, created, reseeded := toInt(res[0]), toInt(res[1]), toInt(res[2])
	s.learnEpoch(toString(res[3]), time.UnixMilli(toInt(res[4])))
	if created == 0 || reseeded != 0 {
		return 0, nil
	}
	newcomer := consumer.NewcomerWait(s.c.cfg.LeasePeriod).Milliseconds()
	wait := created + newcomer - now
	// A Redis restarted empty (not only flushed) says so: a new run, up for
	// a short time. Holders paused or cut off while it restarted may wake
	// any time within their lease, so a record created since it started is
	// taken from only once it has been up a lease period and the newcomer
	// wait: by then every holder whose lease was live at the restart has
	// re-seeded, or its lease ended (consumer.RestartWait). INFO counts
	// whole seconds: the server started up to a second before now-up, and
	// no later than it. So the rule applies to a record created at most a
	// second before the server started, and asks at most until the record
	// is restart+1s old; an older record needs no INFO, and none is sent
	// (docs/deploy.md: one server with min_replicas_to_ack 0 needs no INFO
	// to join an existing group).
	restart := consumer.RestartWait(s.c.cfg.LeasePeriod).Milliseconds()
	if now-created > restart+1000 {
		return max(0, time.Duration(wait)*time.Millisecond), nil
	}
	up, known, err := s.serverUptime(ctx)
	if err != nil {
		return 0, fmt.Errorf("joining group %s: %w", s.c.cfg.Group, err)
	}
	if !known {
		// The user may not run INFO: wait as if the server had started
		// just as the record was created, the longest the rule asks.
		wait = max(wait, created+restart+1000-now)
		if s.log != nil {
			s.log.Infof("The Redis user may not run INFO, so whether Redis just restarted empty cannot be told: taking the group's first shards in %v, once its record is lease.period and the newcomer wait old (grant INFO to shorten this first wait; docs/deploy.md)",
				time.Duration(wait)*time.Millisecond)
		}
		return max(0, time.Duration(wait)*time.Millisecond), nil
	}
	if started := now - up.Milliseconds(); created >= started-1000 {
		if rest := restart - up.Milliseconds(); rest > 0 {
			s.youngServer, s.young = up, true
			wait = max(wait, rest)
		}
	}
	return max(0, time.Duration(wait)*time.Millisecond), nil
}

// serverUptime reads how long the Redis server that holds the group's keys
// has been up (INFO server, in whole seconds); known is false when the
// Redis user may not run INFO, which is then no error (and not logged as
// one: Join waits the longest instead).
func (s *Store) serverUptime(ctx context.Context) (up time.Duration, known bool, err error) {
	node, err := s.c.masterFor(ctx, s.keys.Epoch)
	if err != nil {
		return 0, false, err
	}
	info, err := node.Info(withOptionalPermission(ctx), "server").Result()
	if errors.Is(err, ErrNoPermission) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading how long Redis has been up (INFO server): %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break
			}
			return time.Duration(n) * time.Second, true, nil
		}
	}
	return 0, false, fmt.Errorf("reading how long Redis has been up: INFO server has no uptime_in_seconds")
}

// JoinedYoungServer reports the Redis server's uptime when Join waited for
// it to have been up a lease period (consumer.YoungServer).
func (s *Store) JoinedYoungServer() (time.Duration, bool) {
	return s.youngServer, s.young
}

var _ consumer.YoungServer = (*Store)(nil)

// CheckGroup tells whether the store still holds the group record this
// store knows: ErrStoreForgot when it is gone or replaced. One HGET in a
// script, whatever the shard count.
func (s *Store) CheckGroup(ctx context.Context) error {
	if err := groupScript.Run(ctx, s.c.client, []string{s.keys.Epoch}, s.knownEpoch()).Err(); err != nil {
		return storeErr("checking the group record", err)
	}
	return nil
}

var _ consumer.GroupChecker = (*Store)(nil)

// CheckGroups checks the group records of stores, this one's kind, in one
// call: every stream's group record where Redis is not a Cluster (groups.lua),
// so the check costs an instance one call a second however many streams it
// reads. In a Cluster each stream's keys have a slot of their own and a
// script may not touch two, so there, and for a store of another
// Checkpointer or kind, each is checked on its own.
func (s *Store) CheckGroups(ctx context.Context, stores []consumer.Store) []error {
	errs := make([]error, len(stores))
	_, cluster := s.c.client.(*redis.ClusterClient)
	var batch []int
	var keys []string
	var known []any
	var alone []int
	for i, st := range stores {
		if o, ok := st.(*Store); ok && o.c == s.c && !cluster {
			batch = append(batch, i)
			keys = append(keys, o.keys.Epoch)
			known = append(known, o.knownEpoch())
			continue
		}
		if _, ok := st.(consumer.GroupChecker); ok {
			alone = append(alone, i)
		}
	}
	wait := onTheirOwn(alone, func(i int) { errs[i] = stores[i].(consumer.GroupChecker).CheckGroup(ctx) })
	defer wait()
	if len(batch) == 0 {
		return errs
	}
	res, err := groupsScript.Run(ctx, s.c.client, keys, known...).Slice()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("groups script returned %d answers for %d streams", len(res), len(batch))
	}
	for j, i := range batch {
		switch {
		case err != nil:
			errs[i] = storeErr("checking the group records", err)
		case toInt(res[j]) != 1:
			found, _ := res[j].(string)
			errs[i] = forgotErr("checking the group record", found)
		}
	}
	return errs
}

var _ consumer.GroupsChecker = (*Store)(nil)
