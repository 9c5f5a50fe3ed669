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
	{"", "The input's byte budget (max_buffered_bytes %d) has held shards back", "Shards waited longer than `lag_warn_threshold` for room in `max_buffered_bytes`: the pipeline acks slower than the input reads.", "Speed up the pipeline or its output; make an output `batching` policy flush by `period`; raise the budget and the memory limit with it ([sizing memory](tuning.md#sizing-memory-max_buffered_bytes))."},
	{"", "The input's byte budget (max_buffered_bytes %d) has let no shard in", "No shard got room for a minute: the messages held are not being acked (a batching policy without `period`, a stuck output).", "Make every `batching` flush by `period`; check the output; the message names the shards holding the room."},
	{"internal/consumer/budget/watch.go", "(composed in Watch)", "Shards waited longer than `lag_warn_threshold` for room in `max_buffered_bytes`, and most of the room is reserved for calls to Kinesis that have not answered: Kinesis, not the pipeline, is slow.", "Check Kinesis' latency and throttling (`kinesis_input_throttled_total`); raising the budget would not help."},
	{"", "The input's byte budget held %d bytes once no reader held anything", "A defect of the input: room was held with no reader alive to give it back. The input took it back, so the budget keeps its size.", "Nothing is lost; report it with the log lines around it, so the leak can be fixed."},
	// The input: leases and balancing.
	{"", "Not reading: %v", "Another running process of the group holds this `lease.instance_id` (a fixed id in a shared config, or a copy that was paused and whose id was taken over). The input stops and the binary exits with status 1, so no shard is read twice.", "Give each copy its own `lease.instance_id` (e.g. `${POD_NAME}`), or leave it empty ([deploy.md](deploy.md#the-instance-id))."},
	{"", "Reading hand-off requests failed", "Redis did not answer a balancing round's read.", "Transient: retried next round. If it repeats, check Redis (`checkpoint.redis.url`)."},
	{"", "Reading the balancing round's state failed", "Redis did not answer a balancing round's read.", "Transient: retried next round. If it repeats, check Redis."},
	{"", "Stopping the shard's reader: its parent", "A shard's parent is listed but not closed (a listing left it out, or Redis lost its closed mark); the child waits so per-key order holds.", "Nothing: the parent is read to its end first, then the child. See [reshards](operating.md#what-happens-on-a-reshard)."},
	{"", "Lease fenced:", "`checkpoints reset` or `import` replaced the stream's checkpoints, or an instance found the stream recreated.", "Expected after an operator's reset or import: the shard is taken again from its new position."},
	{"", "Lease missing from the store", "The lease key is gone: pruned as trimmed while this instance could not renew, or the group was deleted with `checkpoints delete`.", "If nobody deleted the group, check Redis (eviction: use `noeviction`)."},
	{"", "Lease no longer ours in the store (it expired", "This instance did not renew in time (a pause, a slow Redis) and another took or renewed the lease.", "Check for process pauses (CPU limits, GC, swap) and Redis latency; keep `lease.period` well above them."},
	{"", "Lease no longer ours in the store (reading who holds it failed", "A renewal found the lease changed and Redis did not say who holds it.", "Check Redis and look for process pauses; the shard is taken again at the next round if free."},
	{"", "Lease taken by instance", "Another instance took the lease: its deadline had passed here (a pause), or a hand-off.", "Occasional: normal during failover. Repeating: look for pauses and Redis latency."},
	{"", "Lease taken by another instance while the checkpoint store was re-seeded", "Redis forgot the group; while this instance re-seeded it, another took the shard.", "Nothing: the other instance reads it. Find why Redis lost its data (persistence, eviction)."},
	{"", "Heartbeat failed", "A lease renewal or membership heartbeat did not reach Redis.", "Transient: retried. Repeating: check Redis; `kinesis_checkpoint_errors_total` counts them."},
	{"", "Requesting hand-off of shard", "A balancing request could not be written to Redis.", "Transient: the next round asks again. Repeating: check Redis."},
	{"", "Acquiring the lease failed", "Taking a free shard's lease failed at Redis.", "Transient: retried next round. Repeating: check Redis and its ACL user ([deploy.md](deploy.md#redis-acl-users))."},
	{"", "%s failed; retrying", "A lease operation (renewal, release) failed at Redis and is retried.", "Transient. Repeating: check Redis."},
	{"", "%s failed for %v; %d of %d shard readers are past", "Renewals have failed so long that leases passed their local deadline: those shards stop reading so no two instances read one shard.", "Restore Redis; reading resumes at the next successful renewal. `KinesisCheckpointErrors` fires meanwhile."},
	{"", "Reading shard loads failed", "The published load of shards could not be read; this round balances by count.", "Transient. Repeating: check Redis."},
	{"", "Pruning %d shards", "Removing state of shards the stream no longer lists failed at Redis.", "Transient: retried after the next listing."},
	{"", "The lease's local deadline passed", "This process did not run for a while (a pause, a CPU-starved container) and can no longer be sure it holds the lease.", "Give the container CPU; check for swap and long GC pauses. Reading resumes once a renewal confirms the lease."},
	{"", "Not delivering until a renewal confirms the lease", "The lease's local deadline passed (a pause, a slow Redis): the reader waits for a renewal before it delivers.", "Give the container CPU, check Redis; delivery resumes once a renewal confirms the lease."},
	// The input: the store and the stream.
	{"", "No stream matches %s", "The listing of streams found none that `streams` matches: a typo in a pattern, or the wrong region, endpoint or credentials. The input still counts as connected (`/ready` answers 200).", "Fix `streams`, `region` or the credentials; `kinesis_input_streams` shows 0 meanwhile. Said again every 10 minutes while nothing matches."},
	{"", "The checkpoint store is a master with %d connected replica(s)", "`checkpoint.redis.kind` is `simple` while the server has replicas: no commit or close waits for a replica, so a failover can lose the last of them.", "Set `kind` to `failover` or `cluster`, or `min_replicas_to_ack` to 1 ([deploy.md](deploy.md))."},
	{"", "The checkpoint store lacked the close of", "Redis forgot the group and another instance re-seeded it without some closed shards; this instance wrote them back.", "Nothing; find why Redis lost its data ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "The checkpoint store refused the close of %d shards this instance knew closed", "After Redis forgot the group, a holder that was paused or cut off won those shards back with its own position; their children wait until it closes them again.", "Nothing: the holder reads them to their end. Find why Redis lost its data ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "Writing back %d closed shards", "The write-back above failed at Redis.", "Retried next round; check Redis."},
	{"", "The checkpoint store forgot this group's state", "Redis restarted empty, was flushed or replaced: this instance re-seeded it with what it knows.", "Give Redis persistence (AOF) or replicas; records may be delivered again, marked `kinesis_redelivered` ([checkpointer.md](checkpointer.md#a-store-that-forgets))."},
	{"", "%d re-seeded leases had passed their local deadline", "While Redis was empty this instance could not renew, so another may hold those shards now.", "Nothing: the readers wait a lease period, then continue if nobody claimed them."},
	{"", "Writing back how far %d shards were delivered after the store was re-seeded failed", "After a re-seed, the redelivery marks could not be written to Redis.", "Retried next round; check Redis."},
	{"", "Storing how far %d shards were delivered failed", "The redelivery marks could not be written; the readers wait so no record goes out unmarked.", "Check Redis; retried automatically."},
	{"", "The stream does not exist (deleted?)", "The stream was deleted (or the name or region is wrong).", "Check `streams`, `region` and the IAM policy; a stream created again under the name is read as a new stream."},
	{"", "Listing shards failed", "ListShards failed (throttling, network, permissions).", "Transient: the previous listing is kept. Repeating: check IAM (`kinesis:ListShards`) and throttling."},
	{"", "The stream was deleted and created again", "The stream's creation time changed: its old checkpoints do not apply.", "Nothing: they were cleared and the shards start at the group's start position."},
	{"", "Checking whether the stream was recreated failed", "DescribeStreamSummary failed while checking for a recreated stream.", "Transient; check IAM (`kinesis:DescribeStreamSummary`)."},
	{"", "Describing the stream again after it was missing failed", "DescribeStreamSummary failed after the stream was missing.", "Transient; check IAM (`kinesis:DescribeStreamSummary`)."},
	{"", "Kinesis did not find the shard though it is still listed, and the stream's creation time changed", "The stream was deleted and created again.", "Nothing: the reader stops and the new stream's shards are taken."},
	{"", "Kinesis did not find the shard though it is still listed;", "GetShardIterator said the shard does not exist though ListShards lists it (Kinesis' lists lag).", "Transient: retried."},
	{"", "The shard is no longer listed (trimmed", "The shard aged out of the retention period before it was read to its end.", "Records in it were lost unread: keep lag below the retention (`KinesisInputLagNearRetention`)."},
	{"", "Shard %s cannot be read: Kinesis has no record at its checkpoint", "The checkpoint belongs to another stream (an import from the wrong source) or to a stream recreated under the name.", "Fix the group's checkpoints: `checkpoints reset`, or import from the right source ([checkpointer.md](checkpointer.md#moving-from-redpanda-connect-or-the-kcl-import))."},
	// The input: reading.
	{"", "Reading the shard failed", "GetRecords or GetShardIterator failed (throttling, network, an expired iterator).", "Transient: retried with backoff. Repeating: check IAM and `kinesis_input_throttled_total`."},
	{"", "Subscribing to the shard failed", "SubscribeToShard failed (enhanced fan-out).", "Transient: retried. Repeating: check IAM (`kinesis:SubscribeToShard`) and the stream consumer ([enhanced-fan-out.md](enhanced-fan-out.md))."},
	{"", "Another subscription of this consumer has held the shard", "A previous owner's subscription still holds the shard until Kinesis notices it gone (at most five minutes).", "Nothing: it subscribes again."},
	{"", "Subscription failed; subscribing again", "A subscription ended with an error.", "Transient: it resumes after the last delivered record."},
	{"", "Subscriptions of the shard keep ending with ResourceNotFound", "Kinesis ends the shard's subscriptions with ResourceNotFound for longer than `backoff.max_elapsed_time`, although subscribing again succeeds (enhanced fan-out).", "Nothing is skipped: each subscription resumes after the last delivered record. If it persists, check the stream consumer's state (`connect-kinesis consumers`) ([enhanced-fan-out.md](enhanced-fan-out.md))."},
	{"", "The stream consumer %s was gone", "The enhanced fan-out consumer was deregistered, or the stream recreated.", "Nothing: it registered or found another; deregister leftovers with `connect-kinesis consumers`."},
	{"", "Record %s looks KPL-aggregated but does not decode", "A record starts with the KPL magic bytes but is not a valid aggregate (its MD5 does not match).", "Nothing: it is delivered as it is. Check the producer if it repeats."},
	{"", "Shard %s is %v behind, past 90%%", "The reader is so far behind that records are about to expire unread.", "Scale out or speed up the pipeline now; raise the stream's retention."},
	{"", "Shard %s is %v behind latest", "The reader is further behind than `lag_warn_threshold`.", "Add instances or speed up the pipeline ([operating.md](operating.md#what-to-do-on-each-alert))."},
	{"", "Committing checkpoint %s failed", "A checkpoint write to Redis failed.", "Transient: retried next `commit_period`. Repeating: check Redis; more is read again after a crash meanwhile."},
	{"", "Closing the shard failed", "Writing a finished shard's close to Redis failed.", "Retried; its children wait until it lands. Check Redis."},
	{"", "Closing the shard is not acknowledged by a replica yet", "`min_replicas_to_ack` replicas did not acknowledge the close within `replica_ack_timeout`.", "Check the replicas' link to the master; retried."},
	{"", "Could not commit the final checkpoint %s before the reader had to stop", "The final commit of a stopping reader failed (Redis unreachable).", "Records acked since the last commit are read again by the next owner; check Redis."},
	{"", "Could not commit the final checkpoint %s of the hand-off", "A hand-off's final commit did not land within `lease.handoff_timeout`.", "Records acked since the last commit are read again by the next owner; check Redis."},
	{"", "Releasing the lease failed", "Releasing a lease at Redis failed.", "Nothing: it expires after `lease.period`."},
	{"", "Stopped waiting for %d in-flight batches", "A stop or hand-off waited `lease.handoff_timeout` and the pipeline had not acked its batches.", "They may be delivered again by the next owner; a slow output, or raise `lease.handoff_timeout`."},
	{"", "Stopped waiting for the lanes' in-flight batches", "A stop or hand-off waited `lease.handoff_timeout` and the pipeline had not acked the lanes' batches (`shard_parallelism` above 1).", "They may be delivered again by the next owner; a slow output, or raise `lease.handoff_timeout`."},
	{"internal/consumer/coordinator/stop.go", "(composed in logStop)", "A stop's summary: shards whose final commit or write-back did not land before the stop's time was up.", "Their records may be delivered again by the next owners; check Redis and the output."},
	{"", "Could not write back how far this instance delivered", "At a stop, the redelivery marks could not be written before time was up.", "If Redis also forgot the group, those records come again without `kinesis_redelivered`; check Redis."},
	{"", "Writing %d records to the dead letter failed", "The `redelivery.dead_letter` output refused or failed.", "Fix the dead-letter output; the shard waits and retries, nothing is skipped ([poison-records.md](poison-records.md))."},
	{"", "Record %s%s of shard %s (stream %s) written to the dead letter", "A record used its `redelivery` attempts or age and went to the dead letter.", "Inspect it there; replay it when the cause is fixed ([poison-records.md](poison-records.md))."},
	{"", "Finding the streams matching %s failed", "Listing streams for a pattern or `stream_tags` failed.", "Transient; check IAM (`kinesis:ListStreams`, `ListTagsForStream`)."},
	{"", "Starting to read a stream found by %s failed", "A stream found by a pattern could not be started.", "Retried after the next listing; the error names why."},
	// The checkpointer.
	{"", "Redis refused a command for lack of permission", "The Redis ACL user lacks a command the scripts need.", "Grant it ([deploy.md](deploy.md#redis-acl-users)); the error names the command."},
	{"", "Gave the lease back", "A take found something it could not use (an unparseable checkpoint, start override or shard start), and gave the lease back.", "The error names the key, field and value and the fix: `checkpoints export`, correct it, `checkpoints reset --to sequences=<file>`."},
	{"", "Giving back the lease of a take that could not be completed failed", "Releasing the lease after a failed take failed at Redis.", "Nothing: it expires after `lease.period`."},
	// The AWS SDK.
	{"internal/awsconf/sdklog.go", "(composed in Logf)", "A warning of the AWS SDK itself (a retry, a checksum it could not check), passed through.", "Read it as the SDK's; usually nothing to do."},
	// The output.
	{"", "%s gave %d of a batch's %d messages the key \"null\"", "`partition_key` found no value for some messages: they all go to one shard under `null`.", "Give every message a value, or a default with `.or(...)`."},
	{"", "Batches numbered %d to %d by the output's batching never reached it", "With `preserve_order`, batches the batching numbered were dropped before the output (a processor or `switch` filtered them).", "Nothing: later batches go on without them."},
	{"", "Writing ordered batches one at a time", "The batching policy cannot carry the output's numbering (e.g. it has processors that split batches).", "Expected with such a policy; throughput is lower. See `ordered_batches_in_flight`."},
	{"", "Refreshing the shard map, keeping the previous one", "ListShards failed for the output.", "Transient; check IAM (`kinesis:ListShards`)."},
	{"", "Refreshing the shard map after a record landed on an unexpected shard", "After a reshard the output's map was stale, and refreshing it failed.", "Transient; check IAM (`kinesis:ListShards`)."},
	{"internal/producer/retry.go", "(composed in onRetry)", "Kinesis refused some records (throttling, internal errors), at most once per 10 s.", "Occasional: nothing. Sustained: add shards, spread keys, or enable `aggregation` (`KinesisOutputThrottled`)."},
	{"", "Retrying records Kinesis refused", "Kinesis refused some records (throttling, internal errors) and they are sent again.", "Occasional: nothing. Sustained: add shards, spread keys, or enable `aggregation`."},
	{"", "Kinesis refused records until the retry budget ran out", "Records kept being refused until `max_retries` or `backoff.max_elapsed_time`.", "The messages failed: fix the capacity (shards, keys) and let the pipeline replay them."},
	{"", "Records failed for good", "Records that can never be written (too large, a bad key) or refused to the end.", "The error names each message and its reason ([operating.md](operating.md#what-to-do-on-each-alert))."},
	// The metrics exporter.
	{"", "Metric not exported: a metric of this name", "Two metrics share a name with different labels or types.", "Rename one (a metric processor's name, or its labels)."},
	{"", "Metric not exported: %v", "The Prometheus registry refused a metric.", "The message names why; rename the metric."},
	// The checkpoints CLI.
	{"internal/ops/import.go", "%s is not a shard the stream lists", "An imported or reset checkpoint names a shard the stream does not list (trimmed?).", "Nothing if it was trimmed; else check the source file or stream."},
	{"internal/ops/import.go", "%s", "A warning about the import's source (e.g. state it cannot carry over).", "Read it before confirming with `--yes`."},
	{"", "--%s is deprecated for import", "A deprecated flag of `checkpoints import`.", "Pass the flags the message names."},
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

For whoever reads the logs of connect-kinesis. Every WARN and ERROR the
` + "`kinesis`" + ` input, the ` + "`kinesis`" + ` output, the Redis checkpointer and the
metrics exporter can log, and every warning the ` + "`checkpoints`" + ` CLI prints,
with its cause and what to do. The messages are taken from the code
(` + "`%s`, `%d`, `%v`" + ` stand for the values logged), so ` + "`make docs-check`" + ` fails
when one is added without an entry here. What to do on each alert:
[operating.md](operating.md#what-to-do-on-each-alert).

`)
	section := ""
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
		text := m.Text
		if len(strings.Fields(text)) > 40 {
			text = strings.Join(strings.Fields(text)[:40], " ") + " …"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", m.Level, cell(strings.ReplaceAll(text, "`", "'")), cell(troubles[j].Cause), cell(troubles[j].Fix))
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
