package ops

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A KCL 2.x/3.x lease table has one item per shard lease, hash key
// leaseKey. A single-stream application's lease key is the shard id; a
// multi-stream application's is "<account>:<streamName>:<creationEpoch>:<shardId>",
// with the stream identifier also in the attribute streamName and the shard
// in shardId. The checkpoint is the string attribute checkpoint with the
// number checkpointSubSequenceNumber: a sequence number (records up to and
// including that sub-record are done; the KCL resumes at the sequence number
// and drops what is not past the checkpoint) or a sentinel: SHARD_END (the
// shard is finished), TRIM_HORIZON, LATEST or AT_TIMESTAMP (not started:
// begin at that position). leaseOwner names the worker holding it (KCL 3.x
// adds checkpointOwner during a graceful hand-off); parentShardId is a
// string set. Lease liveness is judged by leaseCounter changes over time, so
// one read cannot tell a live lease from a stale one.
//
// Not every item is a shard lease. KCL 3.x keeps its coordinator state
// (leader lock, 2.x-to-3.x migration state; hash key "key") and worker
// metrics (hash key "wid") in tables of their own, but an application that
// pointed them at one table, or a later release marking items by their
// entityType, puts items in the lease table that are not leases; an import
// taking them for leases would refuse on their "owner" or fail on their
// "checkpoint". KCL's own values of entityType are LEASE for a shard lease
// and STREAM, LEADER, CLIENT_VERSION_MIGRATION, TABLE_MIGRATION and
// WORKER_METRIC_STATS for the rest; rows written before the attribute
// existed have none. So an item is a shard lease only when it has a
// leaseKey whose last part is a shard id ("shardId-<digits>"), a
// checkpoint, and no entityType other than LEASE (in any case); every
// other item is skipped and named in a warning.
const (
	kclAttrLeaseKey        = "leaseKey"
	kclAttrCheckpoint      = "checkpoint"
	kclAttrSubSequence     = "checkpointSubSequenceNumber"
	kclAttrOwner           = "leaseOwner"
	kclAttrCheckpointOwner = "checkpointOwner"
	kclAttrStreamName      = "streamName"
	kclAttrShardID         = "shardId"
	kclAttrEntityType      = "entityType"
	kclAttrParents         = "parentShardId"

	kclShardEnd    = "SHARD_END"
	kclTrimHorizon = "TRIM_HORIZON"
	kclLatest      = "LATEST"
	kclAtTimestamp = "AT_TIMESTAMP"
)

// kclLease is one lease item, its key split.
type kclLease struct {
	// stream is the multi-stream identifier "<account>:<name>:<epoch>", ""
	// in a single-stream table.
	stream, shard string
	it            item
}

// kclShardID is a Kinesis shard id, the shard part of a lease key.
var kclShardID = regexp.MustCompile(`^shardId-[0-9]+$`)

// splitKCLLease splits a lease item's key; skip says why an item is not a
// shard lease ("" for one that is).
func splitKCLLease(it item) (l kclLease, skip string) {
	key := attrS(it, kclAttrLeaseKey)
	if key == "" {
		return kclLease{}, "no leaseKey"
	}
	if et := attrS(it, kclAttrEntityType); et != "" && !strings.EqualFold(et, "lease") {
		return kclLease{}, "entityType " + et
	}
	l = kclLease{shard: key, it: it}
	if s, sh := attrS(it, kclAttrStreamName), attrS(it, kclAttrShardID); s != "" && sh != "" {
		l.stream, l.shard = s, sh
	} else if i := strings.LastIndexByte(key, ':'); i >= 0 {
		l.stream, l.shard = key[:i], key[i+1:]
	}
	if !kclShardID.MatchString(l.shard) {
		return kclLease{}, "not a shard id"
	}
	if _, ok := it[kclAttrCheckpoint]; !ok {
		return kclLease{}, "no checkpoint"
	}
	return l, ""
}

// itemName names an item for a warning: its leaseKey, or the hash key of
// a KCL coordinator ("key") or worker metrics ("wid") item.
func itemName(it item) string {
	for _, k := range []string{kclAttrLeaseKey, "key", "wid"} {
		if v := attrS(it, k); v != "" {
			return k + " " + strconv.Quote(v)
		}
	}
	return "an item without leaseKey"
}

// kclStreamParts splits a multi-stream identifier "<account>:<name>:<epoch>".
func kclStreamParts(ident string) (account, name, epoch string) {
	parts := strings.Split(ident, ":")
	if len(parts) != 3 {
		return "", ident, ""
	}
	return parts[0], parts[1], parts[2]
}

// readKCLTable reads the leases of one stream from a KCL lease table. In a
// multi-stream table the stream is sourceStream when given, else the
// identifier whose name (and account, with an ARN) is the stream's; with
// several (a stream deleted and created again) the one whose creation time
// is the stream's.
func readKCLTable(items []item, table string, stream streamInfo, sourceStream string) (foreignTable, error) {
	byStream := map[string][]kclLease{}
	var skipped []string
	for _, it := range items {
		l, skip := splitKCLLease(it)
		if skip != "" {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", itemName(it), skip))
			continue
		}
		byStream[l.stream] = append(byStream[l.stream], l)
	}
	if len(byStream) == 0 {
		return foreignTable{}, fmt.Errorf("table %s holds no KCL shard lease (an item with a leaseKey ending in a shard id and a checkpoint); is it a KCL lease table? Its %d items: %s",
			table, len(items), strings.Join(firstN(skipped, 5), ", "))
	}
	multi := slices.DeleteFunc(slices.Sorted(maps.Keys(byStream)), func(s string) bool { return s == "" })
	src := foreignTable{Shards: map[string]foreignShard{}}
	if len(skipped) > 0 {
		slices.Sort(skipped)
		src.Warnings = append(src.Warnings, fmt.Sprintf("skipped %d items of table %s that are not shard leases (KCL coordinator or worker-metrics rows, say): %s",
			len(skipped), table, strings.Join(firstN(skipped, 10), ", ")))
	}
	var key string
	switch {
	case sourceStream != "":
		if _, ok := byStream[sourceStream]; !ok {
			return src, fmt.Errorf("flag --%s: table %s has no leases of stream identifier %q (it has: %s)", flagSourceStream, table, sourceStream, quoteList(multi))
		}
		key = sourceStream
	case len(multi) > 0:
		var found []string
		for _, ident := range multi {
			account, name, _ := kclStreamParts(ident)
			if name == stream.Name && (stream.account() == "" || account == stream.account()) {
				found = append(found, ident)
			}
		}
		// Every identifier of the name is checked against the stream's
		// creation time, a single one too: the leases of a deleted stream
		// of the same name give positions of other records and SHARD_END
		// for shards the new stream has open.
		if len(found) > 0 && !stream.Created.IsZero() {
			epoch := strconv.FormatInt(stream.Created.Unix(), 10)
			other := found
			found = slices.DeleteFunc(slices.Clone(found), func(ident string) bool { _, _, e := kclStreamParts(ident); return e != epoch })
			if len(found) == 0 {
				return src, otherIncarnationError(table, stream, epoch, other, byStream)
			}
		}
		switch len(found) {
		case 0:
			return src, fmt.Errorf("table %s holds no leases of stream %s (stream identifiers in it: %s); name the one to import with --%s", table, stream.Name, quoteList(multi), flagSourceStream)
		case 1:
			key = found[0]
		default:
			return src, fmt.Errorf("table %s holds leases of several streams named %s (%s); choose one with --%s", table, stream.Name, quoteList(found), flagSourceStream)
		}
	default:
		src.Warnings = append(src.Warnings, "a single-stream KCL lease table does not name its stream: make sure it is the table of an application reading "+stream.Name)
	}
	if key == "" {
		src.Describe = fmt.Sprintf("KCL lease table %s (single-stream)", table)
	} else {
		src.Describe = fmt.Sprintf("KCL lease table %s (stream %s)", table, key)
	}

	for _, l := range byStream[key] {
		sh, err := kclShard(l)
		if err != nil {
			return src, fmt.Errorf("table %s, lease %s: %w", table, attrS(l.it, kclAttrLeaseKey), err)
		}
		// A KCL lease carries no expiry (workers judge liveness by its
		// counter changing over time), and a stopped worker clears its
		// owner: a lease that names one is taken as live.
		sh.Live = sh.Owner != ""
		src.Shards[sh.Shard] = sh
	}
	if key == "" && len(stream.Shards) > 0 {
		listed := stream.listed()
		if !slices.ContainsFunc(slices.Collect(maps.Keys(src.Shards)), func(id string) bool { return listed[id] }) {
			return src, fmt.Errorf("table %s: none of its %d leases is a shard of stream %s; is it the lease table of another application?", table, len(src.Shards), stream.Name)
		}
	}
	return src, nil
}

// otherIncarnationError refuses a multi-stream table whose identifiers of the
// stream's name all carry another creation time than the stream's, naming
// them, the open shards their SHARD_END leases would close, and the flags
// that import them anyway.
func otherIncarnationError(table string, stream streamInfo, epoch string, idents []string, byStream map[string][]kclLease) error {
	open := map[string]bool{}
	for _, sh := range stream.shards() {
		open[sh.ID] = !sh.Closed
	}
	var closes []string
	for _, ident := range idents {
		for _, l := range byStream[ident] {
			if open[l.shard] && attrS(l.it, kclAttrCheckpoint) == kclShardEnd {
				closes = append(closes, fmt.Sprintf("%s (SHARD_END under %s; --%s %s)", l.shard, ident, flagAllowOpenShard, l.shard))
			}
		}
	}
	msg := fmt.Sprintf("table %s holds leases of stream %s only under %s, but the stream was created at epoch %s (%s): "+
		"they are the leases of a stream of the same name deleted and created again, whose positions are not this stream's",
		table, stream.Name, quoteList(idents), epoch, stream.Created.UTC().Format(time.RFC3339))
	if len(closes) > 0 {
		slices.Sort(closes)
		msg += "; they would close shards the stream lists open: " + strings.Join(closes, ", ")
	}
	return fmt.Errorf("%s; to import them anyway, name the identifier with --%s (and each such shard with --%s)", msg, flagSourceStream, flagAllowOpenShard)
}

// firstN is the first n of ss, with a count of the rest.
func firstN(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(slices.Clone(ss[:n]), fmt.Sprintf("and %d more", len(ss)-n))
}

// kclShard converts one lease's checkpoint. A checkpoint (seq, sub) becomes
// "<seq>/<sub>": resume at seq and skip its sub-records up to sub, which for
// a record that is not KPL-aggregated (sub 0) skips the record itself, as
// the KCL does.
func kclShard(l kclLease) (foreignShard, error) {
	sh := foreignShard{Shard: l.shard, Owner: attrS(l.it, kclAttrOwner), Parents: []string{}}
	if ps := attrSS(l.it, kclAttrParents); ps != nil {
		sh.Parents = ps
	}
	if co := attrS(l.it, kclAttrCheckpointOwner); co != "" && sh.Owner == "" {
		sh.Owner = co
	}
	cp := attrS(l.it, kclAttrCheckpoint)
	switch cp {
	case "":
		return sh, nil
	case kclShardEnd:
		sh.Position = consumer.Position{ShardEnd: true}
		return sh, nil
	case kclTrimHorizon, kclLatest, kclAtTimestamp:
		sh.Sentinel = cp
		return sh, nil
	}
	sub := int64(0)
	if n := attrN(l.it, kclAttrSubSequence); n != "" {
		var err error
		if sub, err = strconv.ParseInt(n, 10, 64); err != nil || sub < 0 {
			return sh, fmt.Errorf("checkpointSubSequenceNumber %q is not a non-negative integer", n)
		}
	}
	p, err := consumer.ParsePosition(cp + "/" + strconv.FormatInt(sub, 10))
	if err != nil {
		return sh, fmt.Errorf("checkpoint %q is neither a sequence number nor one of SHARD_END, TRIM_HORIZON, LATEST, AT_TIMESTAMP", cp)
	}
	sh.Position = p
	return sh, nil
}
