package budget

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// CheckInterval is how often the budget's waiters are looked at for
// the warning; EpisodeGap is how long no shard may wait for a
// warning's episode to end.
const (
	CheckInterval = time.Second
	EpisodeGap    = time.Minute
)

// CallsNotAnswered is in the warning that shards were held back when most
// of the room is reserved for calls Kinesis has not answered, and only
// there (the soak tells the two warnings apart by it).
const CallsNotAnswered = "have not answered yet"

// InPipelineField is the field of the budget's warning that says how
// many of the bytes held are batches handed to the pipeline, not yet acked
// (the soak weighs them at its slow outputs' pace).
const InPipelineField = "in_pipeline_bytes"

// LetInAgain is in the INFO line that ends a warned wait, and only there
// (the soak measures a warned wait by it).
const LetInAgain = "lets in the shards it held back"

// Watch warns once per episode when the budget has held shards back
// for longer than after: an episode lasts until no shard waited for a whole
// gap. One warning for the input, not one per shard: every waiting shard
// waits for the same reason. Once no shard has waited longer than after
// (or none waits), it says so at INFO with the longest wait it saw, so
// that a warned wait has an end in the log. It looks every tick.
func (b *Budget) Watch(ctx context.Context, log *service.Logger, after, gap, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	warned, over := false, false // over: warned, and some shard still waits longer than after
	var longest time.Duration
	var lastWaiting, stallWarned time.Time
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if n := b.takeLeaked(); n != 0 {
			log.Errorf("The input's byte budget held %d bytes once no reader held anything; it took them back. Room nobody gives back would shrink max_buffered_bytes for the life of the process: this is a defect of the input, please report it", n)
		}
		held, waiting, oldest := b.State()
		now := time.Now()
		stallWarned = b.watchStall(log, now, stallWarned)
		if waiting > 0 {
			lastWaiting = now
		}
		if over {
			if waiting > 0 && now.Sub(oldest) > after {
				longest = max(longest, now.Sub(oldest))
			} else {
				over = false
				log.Infof("The input's byte budget "+LetInAgain+": the longest wait was %v, lag_warn_threshold %v", longest.Round(time.Second), after)
			}
		}
		switch {
		case waiting > 0 && !warned && after > 0 && now.Sub(oldest) > after:
			warned, over, longest = true, true, now.Sub(oldest)
			calls := b.callsUnderWay()
			l := log.With("waiting_shards", waiting, "buffered_bytes", held, "max_buffered_bytes", b.capacity, "reserved_for_calls", calls)
			if 2*calls > held {
				// Most of the room waits for answers, not for the pipeline:
				// raising the budget or speeding the pipeline up would not
				// help.
				l.Warnf("The input's byte budget (max_buffered_bytes %d) has held shards back for %v, longer than lag_warn_threshold (%v): %d shards wait to fetch while %d bytes are held, %d of them reserved for calls to Kinesis that "+CallsNotAnswered+". Kinesis answers slowly or not at all (see the read errors); the shards are let in as those calls answer or time out",
					b.capacity, now.Sub(oldest).Round(time.Second), after, waiting, held, calls)
				continue
			}
			piped := b.handedToPipeline()
			l.With(InPipelineField, piped).Warnf("The input's byte budget (max_buffered_bytes %d) has held shards back for %v, longer than lag_warn_threshold (%v): %d shards wait to fetch while %d bytes of records wait in the input or for the pipeline's acks, %d of them handed to the pipeline. The pipeline is slower than the streams; raise max_buffered_bytes if the process has the memory, or speed the pipeline up",
				b.capacity, now.Sub(oldest).Round(time.Second), after, waiting, held-calls, piped)
		case warned && waiting == 0 && now.Sub(lastWaiting) >= gap:
			warned = false
			log.Infof("The input's byte budget no longer holds shards back (none waited for %v)", gap)
		}
	}
}

// watchStall warns when the head of the budget's queue has had no grant
// for the budget's stallAfter, naming the shards that hold the room, and
// says at INFO when the queue moves again. warned is when the current
// stall was warned of (zero when none); it returns the new value.
func (b *Budget) watchStall(log *service.Logger, now, warned time.Time) time.Time {
	since, holders := b.stalledSince()
	switch {
	case since.IsZero() || since.After(warned) && !warned.IsZero():
		if !warned.IsZero() {
			log.Info("The input's byte budget lets shards in again")
		}
		return time.Time{}
	case !warned.IsZero() || now.Sub(since) < b.stallAfter:
		return warned
	}
	held, waiting, _ := b.State()
	log.With("waiting_shards", waiting, "buffered_bytes", held, "max_buffered_bytes", b.capacity).
		Warnf("The input's byte budget (max_buffered_bytes %d) has let no shard in for %v: %d shards wait while %d bytes are held by %s. "+
			"Room comes back only when the pipeline acks: a pipeline that holds its messages without acking them (an output batching policy that flushes at a count and has no period, batching on the input side of a broker) stalls the input; give it a period, or raise max_buffered_bytes above what it holds",
			b.capacity, now.Sub(since).Round(time.Second), waiting, held, describeHolders(holders))
	return now
}

// describeHolders names the live shards holding the most room, most
// first, and sums up what shards whose readers ended still hold: their
// batches in the pipeline, waiting for its acks.
func describeHolders(holders []*Shard) string {
	var live []*Shard
	var ended int64
	for _, s := range holders {
		if s.ended.Load() {
			ended += s.held.Load()
			continue
		}
		live = append(live, s)
	}
	slices.SortFunc(live, func(x, y *Shard) int { return cmp.Compare(y.held.Load(), x.held.Load()) })
	const shown = 5
	var parts []string
	for i, s := range live {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(live)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", s.name, s.held.Load()))
	}
	if ended > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes in batches of readers that ended, still in the pipeline", ended))
	}
	if len(parts) == 0 {
		return "no shard"
	}
	return strings.Join(parts, ", ")
}
