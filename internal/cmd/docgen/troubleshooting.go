package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// trouble is the cause and the fix of the messages that start with Match
// (and, when Where is set, come from that file).
type trouble struct {
	Where, Match, Cause, Fix string
}

// troubles explains every WARN and ERROR of scanMessages. The docs check
// fails when a message has no entry here or an entry matches no message,
// so the page cannot drift from the code.
var troubles = []trouble{
	// The input: budget.
	{"", "The input's byte budget (max_buffered_bytes %d) has held shards back", "The pipeline acks slower than the input reads.", "Speed up the pipeline ([sizing memory](tuning.md#sizing-memory-max_buffered_bytes))."},
	{"", "The input's byte budget (max_buffered_bytes %d) has let no shard in", "Held messages are not acked.", "Give every `batching` a `period`; check the output."},
	{"internal/consumer/budget/watch.go", "(composed in Watch)", "Room is held by Kinesis calls that have not answered.", "Check Kinesis latency and throttling."},
	{"", "The input's byte budget held %d bytes once no reader held anything", "A defect; the input took the room back.", "Nothing is lost; report it."},
	// The input: leases and balancing.
	{"", "Not reading: %v", "Another running process has this `lease.instance_id`; this one exits 1.", "Give each copy its own id ([deploy.md](deploy.md#the-instance-id))."},
	{"", "Reading hand-off requests failed", "Redis did not answer a balancing read.", "Repeating: check Redis."},
	{"", "Reading the balancing round's state failed", "Redis did not answer a balancing read.", "Repeating: check Redis."},
	{"", "Stopping the shard's reader: its parent", "A parent is not closed yet.", "Nothing: the parent is read first ([reshards](operating.md#what-happens-on-a-reshard))."},
	{"", "Stopping the shard's reader: its parent %s was taken back", "A paused holder took back the parent this instance closed.", "Nothing: the parent is read first ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "Reading the shards a re-seed reopened failed", "Redis did not answer after a re-seed.", "Nothing: the next round stops them."},
	{"", "Lease fenced:", "Checkpoints were reset or imported, or the stream recreated.", "Nothing: the shard is taken again."},
	{"", "Lease missing from the store", "The lease key was pruned or deleted.", "Check Redis eviction (use `noeviction`)."},
	{"", "Lease no longer ours in the store (it expired", "A renewal came too late; another took the lease.", "Check pauses and Redis latency."},
	{"", "Lease no longer ours in the store (reading who holds it failed", "The lease changed and Redis did not say to whom.", "Check Redis and process pauses."},
	{"", "Lease taken by instance", "A pause here, or a hand-off.", "Repeating: check pauses and Redis latency."},
	{"", "Lease taken by another instance while the checkpoint store was re-seeded", "Redis forgot the group.", "Find why Redis lost its data."},
	{"", "Heartbeat failed", "A renewal or heartbeat did not reach Redis.", "Repeating: check Redis."},
	{"", "Requesting hand-off of", "A balancing request failed or timed out.", "Repeating: check Redis."},
	{"", "Acquiring the lease failed", "Taking a free lease failed at Redis.", "Repeating: check Redis and its ACL user ([deploy.md](deploy.md#redis-acl-users))."},
	{"", "Acquiring shard leases outlasted the balancing round's time", "No take answered within a third of `lease.period`; free shards stay unread.", "Repeating: check Redis latency."},
	{"", "%s failed; retrying", "A renewal or release failed at Redis.", "Repeating: check Redis."},
	{"", "%s failed for %v; %d of %d shard readers are past", "Renewals failed past the leases' deadline.", "Restore Redis; reading resumes at the next renewal."},
	{"", "Reading shard loads failed", "Shard loads could not be read; this round balances by count.", "Repeating: check Redis."},
	{"", "Pruning %d shards", "Removing trimmed shards' state failed at Redis.", "Transient: retried after the next listing."},
	{"", "The lease's local deadline passed", "The process paused (CPU starvation, swap, GC).", "Give the container CPU."},
	{"", "Not delivering until a renewal confirms the lease", "The lease's local deadline passed.", "Give the container CPU; check Redis."},
	// The input: the store and the stream.
	{"", "No stream matches %s", "A typo, or the wrong region or credentials.", "Fix `streams`, `region` or credentials."},
	{"", "The checkpoint store is a master with %d connected replica(s)", "`kind: simple` with replicas: a failover can lose a shard close.", "Set `kind: failover` or `cluster` ([deploy.md](deploy.md))."},
	{"", "The checkpoint store lacked the close of", "Redis forgot closed shards; they were written back.", "Find why Redis lost its data ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "The checkpoint store refused the close of %d shards this instance knew closed", "After Redis forgot the group, a paused holder won them back.", "Find why Redis lost its data ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "Writing back %d closed shards", "The write-back of closed shards failed at Redis.", "Retried next round; check Redis."},
	{"", "The checkpoint store forgot this group's state", "Redis restarted empty or was flushed; this instance re-seeded it.", "Give Redis AOF or replicas ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "%d re-seeded leases had passed their local deadline", "This instance could not renew before the store forgot.", "Nothing: the readers wait a lease period."},
	{"", "Writing back how far %d shards were delivered after the store was re-seeded failed", "Redelivery marks could not be written after a re-seed.", "Retried next round; check Redis."},
	{"", "Storing how far %d shards were delivered failed", "Redelivery marks could not be written; readers wait.", "Check Redis; retried."},
	{"", "The stream does not exist (deleted?)", "The stream was deleted, or misnamed.", "Check `streams`, `region` and IAM."},
	{"", "Listing shards failed", "ListShards failed (throttling, network, IAM).", "Transient. Repeating: check `kinesis:ListShards` and throttling."},
	{"", "The stream was deleted and created again", "Its creation time changed.", "Nothing: old checkpoints were cleared."},
	{"", "Checking whether the stream was recreated failed", "DescribeStreamSummary failed.", "Transient; check `kinesis:DescribeStreamSummary`."},
	{"", "Describing the stream again after it was missing failed", "DescribeStreamSummary failed.", "Transient; check `kinesis:DescribeStreamSummary`."},
	{"", "Kinesis did not find the shard though it is still listed, and the stream's creation time changed", "The stream was recreated.", "Nothing: the new stream's shards are taken."},
	{"", "Kinesis did not find the shard though it is still listed;", "Kinesis' listing lags its shards.", "Transient: retried."},
	{"", "The shard is no longer listed (trimmed", "The shard expired unread: records were lost.", "Keep lag below the retention (`KinesisInputLagNearRetention`)."},
	{"", "Shard %s cannot be read: Kinesis has no record at its checkpoint", "The checkpoint is another stream's.", "`checkpoints reset`, or import from the right source ([checkpointer.md](checkpointer.md#moving-from-redpanda-connect-or-the-kcl-import))."},
	// The input: reading.
	{"", "Reading the shard failed", "GetRecords or GetShardIterator failed.", "Transient. Repeating: check IAM and `kinesis_input_throttled_total`."},
	{"", "Subscribing to the shard failed", "SubscribeToShard failed.", "Transient. Repeating: check `kinesis:SubscribeToShard` and the consumer ([enhanced-fan-out.md](enhanced-fan-out.md))."},
	{"", "Another subscription of this consumer has held the shard", "A previous owner's subscription holds the shard (up to five minutes).", "Nothing: it subscribes again."},
	{"", "Subscription failed; subscribing again", "A subscription ended with an error.", "Transient: it resumes after the last record."},
	{"", "Subscriptions of the shard keep ending with ResourceNotFound", "Subscriptions keep ending with ResourceNotFound.", "Check the consumer (`connect-kinesis consumers`)."},
	{"", "The stream consumer %s was gone", "The fan-out consumer was deregistered, or the stream recreated.", "Nothing; remove leftovers with `connect-kinesis consumers`."},
	{"", "Record %s looks KPL-aggregated but does not decode", "A record has the KPL magic bytes but a bad MD5.", "Nothing: delivered as is."},
	{"", "Shard %s is %v behind, past 90%%", "Records are about to expire unread.", "Scale out or speed up the pipeline now."},
	{"", "Shard %s is %v behind latest", "The reader is behind `lag_warn_threshold`.", "Add instances or speed up the pipeline ([operating.md](operating.md#what-to-do-on-each-alert))."},
	{"", "Committing checkpoint %s failed", "A checkpoint write failed.", "Repeating: check Redis."},
	{"", "Closing the shard failed", "A finished shard's close failed; its children wait.", "Retried; check Redis."},
	{"", "Closing the shard is not acknowledged by a replica yet", "No replica acknowledged within `replica_ack_timeout`.", "Check the replicas' link; retried."},
	{"", "Could not commit the final checkpoint %s before the reader had to stop", "A stopping reader's final commit failed.", "Acked records come again; check Redis."},
	{"", "Could not commit the final checkpoint %s of the hand-off", "A hand-off's final commit missed `lease.handoff_timeout`.", "Acked records come again; check Redis."},
	{"", "Releasing the lease failed", "A release failed at Redis.", "Nothing: it expires after `lease.period`."},
	{"", "Stopped waiting for %d in-flight batches", "The pipeline did not ack within `lease.handoff_timeout`.", "Fix a slow output or raise the timeout."},
	{"", "Stopped waiting for the lanes' in-flight batches", "The lanes' batches were not acked within `lease.handoff_timeout`.", "Fix a slow output or raise the timeout."},
	{"internal/consumer/coordinator/stop.go", "(composed in logStop)", "Shards whose final commit missed the stop.", "Records may come again; check Redis."},
	{"", "Could not write back how far this instance delivered", "Redelivery marks missed the stop.", "Check Redis."},
	{"", "Writing %d records to the dead letter failed", "The `redelivery.dead_letter` output failed.", "Fix it; the shard waits, nothing is skipped ([poison-records.md](poison-records.md))."},
	{"", "Record %s%s of shard %s (stream %s) written to the dead letter", "A record used up its `redelivery` attempts or age.", "Inspect and replay it ([poison-records.md](poison-records.md))."},
	{"", "Finding the streams matching %s failed", "ListStreams or ListTagsForStream failed.", "Transient; check IAM."},
	{"", "Starting to read a stream found by %s failed", "A found stream could not be started.", "Retried after the next listing."},
	// The checkpointer.
	{"", "Redis refused a command for lack of permission", "The ACL user lacks a command.", "Grant the named command ([deploy.md](deploy.md#redis-acl-users))."},
	{"", "Gave the lease back", "A stored value did not parse.", "`checkpoints export`, fix the named value, `checkpoints reset --to sequences=<file>`."},
	{"", "Giving back the lease of a take that could not be completed failed", "The release after a failed take failed.", "Nothing: it expires after `lease.period`."},
	// The AWS SDK.
	{"internal/awsconf/sdklog.go", "(composed in Logf)", "The AWS SDK's own warning.", "Usually nothing."},
	// The output.
	{"", "%s gave %d of a batch's %d messages the key \"null\"", "`partition_key` was empty.", "Give every message a key, or a default with `.or(...)`."},
	{"", "Batches numbered %d to %d by the output's batching never reached it", "A processor or `switch` dropped numbered batches.", "Nothing: later batches go on."},
	{"", "Writing ordered batches one at a time", "The `batching` policy cannot carry the numbering (e.g. it splits batches).", "Expected; see `ordered_batches_in_flight`."},
	{"", "Refreshing the shard map, keeping the previous one", "ListShards failed.", "Transient; check `kinesis:ListShards`."},
	{"", "Refreshing the shard map after a record landed on an unexpected shard", "The map was stale after a reshard, and ListShards failed.", "Transient; check `kinesis:ListShards`."},
	{"internal/producer/retry.go", "(composed in onRetry)", "Kinesis refused records (throttling).", "Sustained: add shards, spread keys, or enable `aggregation`."},
	{"", "Retrying records Kinesis refused", "Kinesis refused records; they are sent again.", "Sustained: add shards, spread keys, or enable `aggregation`."},
	{"", "Kinesis refused records until the retry budget ran out", "Refused until `max_retries` or `backoff.max_elapsed_time`.", "The messages failed: add capacity; the pipeline replays them."},
	{"", "Records failed for good", "Records too large, badly keyed, or refused.", "The error names each message's reason ([operating.md](operating.md#what-to-do-on-each-alert))."},
	// The metrics exporter.
	{"", "Metric not exported: a metric of this name", "Two metrics share a name with different labels or types.", "Rename one."},
	{"", "Metric not exported: %v", "The Prometheus registry refused a metric.", "Rename it as the message says."},
	// The checkpoints CLI.
	{"internal/ops/import.go", "%s is not a shard the stream lists", "A checkpoint names a shard not listed (trimmed?).", "Nothing if trimmed; else check the source."},
	{"internal/ops/import.go", "%s", "A warning about the import's source.", "Read it before `--yes`."},
	{"", "--%s is deprecated for import", "A deprecated flag.", "Pass the flags it names."},
	// The input: a record that blocks its shard (said at most once a minute per shard).
	{"", "Record %s of stream %s, shard %s has failed %d times on its own", "The pipeline failed this record 5 times while others passed; the shard waits for it. `kinesis_input_millis_behind_latest` shows its age.", "Fix the record's cause, or set `redelivery.dead_letter` and `max_attempts` ([poison-records.md](poison-records.md))."},
}

// matchTroubles pairs each message with its entry and returns what does
// not pair: messages without an entry, entries matching no message.
func matchTroubles(msgs []logMessage) (byMsg map[int]int, problems []string) {
	byMsg = map[int]int{}
	used := map[int]bool{}
	for i, m := range msgs {
		best, bestLen := -1, -1
		for j, t := range troubles {
			if t.Where != "" && t.Where != m.Where {
				continue
			}
			if strings.HasPrefix(m.Text, t.Match) && len(t.Match) > bestLen {
				best, bestLen = j, len(t.Match)
			}
		}
		if best < 0 {
			problems = append(problems, fmt.Sprintf("%s %s %q has no entry in internal/cmd/docgen/troubleshooting.go", m.Where, m.Level, m.Text))
			continue
		}
		byMsg[i] = best
		used[best] = true
	}
	for j, t := range troubles {
		if !used[j] {
			problems = append(problems, fmt.Sprintf("troubleshooting entry %q matches no message the code logs", t.Match))
		}
	}
	return byMsg, problems
}

// messageWords is how much of a message its row quotes at least: enough to
// find it in a log. quote adds words until no other message starts alike.
const messageWords = 8

// quote is the first words of msgs[i]: messageWords of them, or more while
// a message with another entry (byMsg) starts with the same words, so rows
// with different causes never quote the same words. Messages of one entry
// that start alike still share a row.
func quote(msgs []logMessage, byMsg map[int]int, i int) string {
	f := strings.Fields(msgs[i].Text)
	n := min(messageWords, len(f))
	for ; n < len(f); n++ {
		prefix := strings.Join(f[:n], " ")
		clash := false
		for j, m := range msgs {
			if k, ok := byMsg[j]; (!ok || k != byMsg[i]) && strings.HasPrefix(strings.Join(strings.Fields(m.Text), " "), prefix) {
				clash = true
				break
			}
		}
		if !clash {
			break
		}
	}
	if n < len(f) {
		return strings.Join(f[:n], " ") + " …"
	}
	return strings.Join(f, " ")
}

// troubleshootingPage renders docs/troubleshooting.md.
func troubleshootingPage(msgs []logMessage) ([]byte, []string) {
	order := []string{"The input", "The checkpointer", "The output", "The metrics exporter", "The AWS SDK", "The checkpoints CLI"}
	msgs = slices.Clone(msgs)
	slices.SortStableFunc(msgs, func(a, b logMessage) int {
		return slices.Index(order, sectionOf(a.Where)) - slices.Index(order, sectionOf(b.Where))
	})
	byMsg, problems := matchTroubles(msgs)
	var b bytes.Buffer
	b.WriteString(`# Troubleshooting: every WARN and ERROR

<!-- Generated by internal/cmd/docgen from the code and internal/cmd/docgen/troubleshooting.go; do not edit. -->

For whoever reads the logs: every WARN and ERROR connect-kinesis can log,
with its cause and what to do. Rows quote a message's first words (` + "`%s`, `%d`, `%v`" + `
stand for values). Alerts: [operating.md](operating.md#what-to-do-on-each-alert).

`)
	section, last := "", ""
	for i, m := range msgs {
		s := sectionOf(m.Where)
		if s != section {
			section = s
			fmt.Fprintf(&b, "## %s\n\n| level | message | cause | what to do |\n|---|---|---|---|\n", s)
		}
		j, ok := byMsg[i]
		if !ok {
			continue
		}
		// The message's first words find it in a log; the rest is in the
		// code. Two messages that start alike and share an entry are one row.
		text := quote(msgs, byMsg, i)
		row := fmt.Sprintf("| %s | `%s` | %s | %s |\n", m.Level, cell(strings.ReplaceAll(text, "`", "'")), cell(troubles[j].Cause), cell(troubles[j].Fix))
		if row != last {
			b.WriteString(row)
		}
		last = row
		if i+1 == len(msgs) || sectionOf(msgs[i+1].Where) != s {
			b.WriteString("\n")
		}
	}
	return bytes.TrimRight(b.Bytes(), "\n"), problems
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func sectionOf(where string) string {
	switch {
	case strings.HasPrefix(where, "plugins/output"), strings.HasPrefix(where, "internal/producer"):
		return "The output"
	case strings.HasPrefix(where, "plugins/checkpointer"):
		return "The checkpointer"
	case strings.HasPrefix(where, "plugins/prometheus"):
		return "The metrics exporter"
	case strings.HasPrefix(where, "internal/ops"):
		return "The checkpoints CLI"
	case strings.HasPrefix(where, "internal/awsconf"):
		return "The AWS SDK"
	}
	return "The input"
}

// repoRoot is the folder holding go.mod, found upward from the working
// directory (the repository's root under `make`, the package's folder under
// `go test`).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
