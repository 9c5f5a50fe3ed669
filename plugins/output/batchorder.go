package output

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"
)

// Ordered batches in flight, in the order Benthos formed them.
//
// Benthos hands each batch to one of as many writer goroutines as batches
// may be in flight, so two batches formed one after the other can reach
// WriteBatch in either order. The output's own batching, though, forms its
// batches on one goroutine, one after the other, and runs the batching
// policy's processors there as it forms each. The output appends one
// processor of its own to that list, kinesis_batch_order, which numbers
// every batch as it is formed (in the context of its first and last
// messages, which nothing outside this output reads). WriteBatch then takes each batch's
// place among the ordered writes in the order of those numbers, whatever
// order the writer goroutines reach it in; a batch that arrives early waits
// for the earlier numbers to take theirs, which they do before any round
// trip. Two batches of one key are then written in the order they were
// formed, with many batches in flight.
//
// Without batching (`batching: {}`) there is no goroutine forming batches
// to number them, and an ordered output writes one batch at a time unless
// ordered_batches_in_flight says otherwise (see batchesInFlight).

// batchOrderProcessor is the name of the output's numbering processor.
const batchOrderProcessor = "kinesis_batch_order"

// lostBatchWait bounds how long the output waits for a batch its batching
// formed that has not reached WriteBatch: a batch waiting for an earlier
// number (await) and the batching holding the next batch back for one let
// through before it (pacing.go) each wait at most this long. Benthos only
// loses a formed batch on its way to the writers when it shuts down, so a
// wait that outlasts it is a lost batch, passed over (a gap is logged), and
// the output cannot stall on one.
const lostBatchWait = 10 * time.Second

var (
	// batchOrders maps the id in each numbering processor's config to its
	// output's numbering: Benthos builds a policy's processors from
	// config, so the output writes its instance's id there, and a config
	// naming the processor itself finds none and is refused.
	batchOrders   sync.Map
	batchOrderIDs atomic.Uint64
)

func init() {
	spec := service.NewConfigSpec().
		Summary("Added by the kinesis output to its own batching policy to pace and number the batches it forms; not for use in a config.").
		Field(service.NewStringField("id")).
		Field(service.NewStringEnumField("step", stepBoth, stepPace, stepNumber).Default(stepBoth))
	err := service.RegisterBatchProcessor(batchOrderProcessor, spec, func(conf *service.ParsedConfig, _ *service.Resources) (service.BatchProcessor, error) {
		id, err := conf.FieldString("id")
		if err != nil {
			return nil, err
		}
		step, err := conf.FieldString("step")
		if err != nil {
			return nil, err
		}
		b, ok := batchOrders.Load(id)
		if !ok {
			return nil, fmt.Errorf("%s is added by the kinesis output to its own batching; it cannot be used in a config", batchOrderProcessor)
		}
		return batchOrderStep{b: b.(*batchOrder), pace: step != stepNumber, number: step != stepPace}, nil
	})
	if err != nil {
		panic(err)
	}
}

// batchOrder numbers the batches an output's batching forms, and lets each
// batch's write take its place in the order of the numbers.
type batchOrder struct {
	id  string
	log *service.Logger
	// gapWait is lostBatchWait, shorter in tests.
	gapWait time.Duration

	issued atomic.Uint64 // the next number to give a batch

	mu sync.Mutex
	// entered is the lowest number whose batch has not taken its place yet:
	// every batch numbered below it has (or was passed over).
	entered uint64
	// moved is closed, and replaced, whenever entered moves.
	moved chan struct{}
	// done marks the numbers above entered whose batches are through with
	// the order out of turn (failed while they waited).
	done map[uint64]bool
	// waiting counts the batches in await by their first number. Only the
	// lowest of them may pass over a gap: the numbers below a higher one
	// include batches that are there, waiting their turn.
	waiting map[uint64]int
	// pacer, if set, holds each batch back before it is formed
	// (pacing.go); paced is the write it let through last, which the
	// batch's first message is to carry. Only the goroutine forming the
	// batches uses paced.
	pacer *batchPacer
	paced *pacedWrite
}

// newBatchOrder registers a numbering for an output and returns it.
func newBatchOrder(log *service.Logger) *batchOrder {
	b := &batchOrder{id: "o" + strconv.FormatUint(batchOrderIDs.Add(1), 10), log: log, gapWait: lostBatchWait, moved: make(chan struct{}), done: map[uint64]bool{}, waiting: map[uint64]int{}}
	batchOrders.Store(b.id, b)
	return b
}

// close forgets the numbering; batches it numbered are still written.
func (b *batchOrder) close() { batchOrders.Delete(b.id) }

// The steps of the numbering processor: a policy without processors of its
// own runs both in one call; one with processors paces before them, once
// per batch formed, and numbers after them, once per part they leave.
const (
	stepBoth   = "both"
	stepPace   = "pace"
	stepNumber = "number"
)

// policy returns the batching policy raw (the batching field as written,
// with its defaults) with the numbering processor added.
func (b *batchOrder) policy(raw any) (service.BatchPolicy, error) {
	fields, ok := raw.(map[string]any)
	if !ok {
		return service.BatchPolicy{}, fmt.Errorf("field %s: expected an object, got %T", fieldBatching, raw)
	}
	withOrder := maps.Clone(fields)
	procs, _ := fields["processors"].([]any)
	step := func(name string) any {
		return map[string]any{batchOrderProcessor: map[string]any{"id": b.id, "step": name}}
	}
	if len(procs) == 0 {
		withOrder["processors"] = []any{step(stepBoth)}
	} else {
		withOrder["processors"] = append(append([]any{step(stepPace)}, procs...), step(stepNumber))
	}
	// yaml, not json: the processors Benthos parsed come back as YAML nodes.
	doc, err := yaml.Marshal(map[string]any{fieldBatching: withOrder})
	if err != nil {
		return service.BatchPolicy{}, fmt.Errorf("field %s: %w", fieldBatching, err)
	}
	conf, err := service.NewConfigSpec().Field(service.NewBatchPolicyField(fieldBatching)).ParseYAML(string(doc), nil)
	if err != nil {
		return service.BatchPolicy{}, fmt.Errorf("field %s: %w", fieldBatching, err)
	}
	return conf.FieldBatchPolicy(fieldBatching)
}

// batchOrderStep is the numbering processor at one place of a policy.
// Benthos calls it on the goroutine that forms the batches, in the order it
// forms them.
type batchOrderStep struct {
	b            *batchOrder
	pace, number bool
}

func (s batchOrderStep) ProcessBatch(ctx context.Context, batch service.MessageBatch) ([]service.MessageBatch, error) {
	if s.pace && len(batch) > 0 {
		s.b.pace(ctx)
	}
	if s.number && len(batch) > 0 {
		s.b.numberBatch(batch)
	}
	return []service.MessageBatch{batch}, nil
}

func (batchOrderStep) Close(context.Context) error { return nil }

// pace holds the batch being formed back (if the order has a pacer). A
// write let through before whose batch no part of reached the numbering
// (the user's processors dropped it) will never be written: it is done.
func (b *batchOrder) pace(ctx context.Context) {
	if b.pacer == nil {
		return
	}
	if b.paced != nil && !b.paced.tagged {
		b.paced.done()
	}
	b.paced = b.pacer.letThrough(ctx)
}

// numberBatch numbers batch in the context of its first and last messages,
// and has its first message carry the write the pacer let through. A part
// of a batch split by the user's processors is numbered like a batch, and
// Benthos joins the parts again, in order, so the batch's first message
// carries the write.
func (b *batchOrder) numberBatch(batch service.MessageBatch) {
	n := b.issued.Add(1) - 1
	first := context.WithValue(batch[0].Context(), b, n)
	if w := b.paced; w != nil {
		first = context.WithValue(first, b.pacer, w)
		w.tagged = true
	}
	batch[0] = batch[0].WithContext(first)
	if last := len(batch) - 1; last > 0 {
		batch[last] = batch[last].WithContext(context.WithValue(batch[last].Context(), b, n))
	}
}

// numbers returns the lowest and highest number batch carries, from its
// first and last messages. A batch that user processors split carries
// several, consecutive: each part is numbered and Benthos joins the parts
// again in order. ok is false for a batch that carries none (one not formed
// by this output's batching).
func (b *batchOrder) numbers(batch service.MessageBatch) (first, last uint64, ok bool) {
	if len(batch) == 0 {
		return 0, 0, false
	}
	if first, ok = batch[0].Context().Value(b).(uint64); !ok {
		return 0, 0, false
	}
	if last, ok = batch[len(batch)-1].Context().Value(b).(uint64); !ok {
		last = first
	}
	return first, last, true
}

// await returns when every batch numbered below first has taken its place,
// or ctx has ended.
func (b *batchOrder) await(ctx context.Context, first uint64) error {
	var gap *time.Timer
	b.mu.Lock()
	b.waiting[first]++
	b.mu.Unlock()
	defer func() {
		if gap != nil {
			gap.Stop()
		}
		b.mu.Lock()
		if b.waiting[first]--; b.waiting[first] == 0 {
			delete(b.waiting, first)
		}
		b.mu.Unlock()
	}()
	for {
		b.mu.Lock()
		if b.entered >= first {
			b.mu.Unlock()
			return nil
		}
		moved, from := b.moved, b.entered
		b.mu.Unlock()
		if gap == nil {
			gap = time.NewTimer(b.gapWait)
		}
		select {
		case <-moved:
			gap.Reset(b.gapWait)
		case <-gap.C:
			b.passOver(from, first)
			gap.Reset(b.gapWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// passOver gives up on the numbers from `from` below first if entered has
// not moved since the wait began and no batch of them waits: none of them
// has reached WriteBatch. A batch numbered between them that waits passes
// over the gap below it when its own timer fires; this one then waits for
// it to take its place.
func (b *batchOrder) passOver(from, first uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entered != from {
		return
	}
	for n := range b.waiting {
		if b.entered < n && n < first {
			return
		}
	}
	b.log.With("batches", first-from).Warnf("Batches numbered %d to %d by the output's batching never reached it within %v; writing the next ones without them", from, first-1, b.gapWait)
	for n := from; n < first; n++ {
		delete(b.done, n)
	}
	b.advanceLocked(first)
}

// tookPlace notes that the batch numbered first to last has taken its place
// (or will not: Benthos forms a new batch, with a new number, for messages
// it sends again).
func (b *batchOrder) tookPlace(first, last uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n := first; n <= last; n++ {
		if n >= b.entered {
			b.done[n] = true
		}
	}
	b.advanceLocked(b.entered)
}

// advanceLocked moves entered to `to`, and on past the numbers done out of
// turn, and wakes the batches waiting if it moved.
func (b *batchOrder) advanceLocked(to uint64) {
	for b.done[to] {
		delete(b.done, to)
		to++
	}
	if to == b.entered {
		return
	}
	b.entered = to
	close(b.moved)
	b.moved = make(chan struct{})
}
