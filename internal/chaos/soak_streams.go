package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// The streams class (issue 37): the instances read, besides their fixed
// streams, every stream matching dynPattern, found while they run
// (stream_discovery_interval dynDiscoveryInterval). The schedule creates
// such streams with keyed load, deletes them, and creates a deleted name
// again with new data. Each life of a name is an incarnation with its own
// label (name#n): its records carry the label (the producer's `stream`
// field, which the instances' mapping puts in front of the shard), and
// their keys are the label's, so the checker tells the incarnations of a
// name apart whatever the emulator's sequence numbers.
//
// A deletion is judged so that lost=0 stays a real check: the stream's
// producer stops, the soak waits until the shadow has read the stream
// after that and every record of it was delivered (or dead-lettered), or
// dynDrainBound passed; only then is the stream deleted. Records left
// undelivered then stay in the ground truth: the checker counts them lost,
// and the monitor reports them ("deleted stream") once every delivery
// stamped before the deletion is in.
const (
	dynPattern           = "soak-dyn-*"
	dynPrefix            = "soak-dyn-"
	dynDiscoveryInterval = 5 * time.Second
	// dynRetention is the instances' deleted_stream_retention: short, so
	// the keys of a deleted stream are pruned during the run.
	dynRetention = 30 * time.Second
	dynShards    = 2
	dynKeys      = 6
	// dynDrainBound is how long a deletion waits for the stream's records
	// to be delivered once its producer stopped and no fault is under way.
	dynDrainBound = 60 * time.Second
	// dynMaxLive bounds the streams of the class alive at once.
	dynMaxLive = 3
	// staleSlack: a delivery of a deleted incarnation stamped this long
	// after its deletion was read after it (the stamp lags the input's
	// hand-over by a little, as fenceSlack says).
	staleSlack = fenceSlack
)

// newStreamBound: every shard with records of a stream created during the
// run is first delivered at most this long after the stream was ACTIVE
// (or after the last fault ended): up to one discovery interval to the
// next listing, one more until every instance's round reads it, one more
// for slack, and the new stream's newcomer wait (a lease period).
func newStreamBound(lease time.Duration) time.Duration { return 3*dynDiscoveryInterval + lease }

// The streams class's operations, drawn in this cycle.
const (
	opCreate   = "create"
	opDelete   = "delete"
	opRecreate = "recreate"
)

// drawStreams draws the class's operations from their own generator, so
// that switching the class on leaves every other class's schedule of a
// seed as it was. They come in the cycle create, delete, re-create (a
// deleted name), each target drawn; a create or re-create late in the run
// is skipped so that its shards' bound can be judged before the load ends.
func drawStreams(seed uint64, d, lease time.Duration) []soakEvent {
	rng := rand.New(rand.NewPCG(seed, seed^0x57ea5))
	first, last := 10*time.Second, d-5*time.Second
	ops := []string{opCreate, opDelete, opRecreate}
	var evs []soakEvent
	i := 0
	for at := first + time.Duration(rng.ExpFloat64()*float64(10*time.Second)); at < last; at += 5*time.Second + time.Duration(rng.ExpFloat64()*float64(15*time.Second)) {
		e := soakEvent{at: at, class: ClassStreams, op: ops[i%len(ops)], target: rng.IntN(1 << 30)}
		if e.op != opDelete && at > last-newStreamBound(lease)-5*time.Second {
			break
		}
		evs = append(evs, e)
		i++
	}
	return evs
}

// dynLabel names incarnation n of stream name.
func dynLabel(name string, n int) string { return name + "#" + strconv.Itoa(n) }

// streamsFault carries out one operation of the class. Operations run one
// at a time.
func (s *soak) streamsFault(ctx context.Context, e soakEvent) error {
	s.dynMu.Lock()
	defer s.dynMu.Unlock()
	if ctx.Err() != nil {
		// The run ended while this operation waited its turn (seed 13: 48
		// operations queued behind a deletion each noted what it would
		// do, at the same instant the run ended).
		return nil
	}
	s.smu.Lock()
	over := s.loadOver
	s.smu.Unlock()
	if over && e.op != opDelete {
		// Operations wait their turn, so one drawn before the load's end
		// may come after it: a stream created then would be written to
		// all through the drain (seed 7, 1 h: soak-dyn-1#25, created as
		// the load ended, wrote for 15 minutes, and its last 12 records
		// counted as lost).
		s.note("streams: the load is over, %s skipped", e.op)
		return nil
	}
	switch e.op {
	case opCreate:
		s.smu.Lock()
		live := len(s.liveDynLocked())
		s.smu.Unlock()
		if live >= dynMaxLive {
			s.note("streams: %d streams of the class alive, create skipped", live)
			return nil
		}
		s.dynNames++
		return s.createDyn(ctx, dynPrefix+strconv.Itoa(s.dynNames), true)
	case opDelete:
		s.smu.Lock()
		live := s.liveDynLocked()
		s.smu.Unlock()
		if len(live) == 0 {
			s.note("streams: no stream of the class alive, delete skipped")
			return nil
		}
		return s.deleteDyn(ctx, live[e.target%len(live)])
	}
	s.smu.Lock()
	var gone []string
	for _, st := range s.dyn {
		if !st.deleted.IsZero() && !slices.Contains(gone, st.name) && s.dynLive(st.name) == nil {
			gone = append(gone, st.name)
		}
	}
	s.smu.Unlock()
	if len(gone) == 0 {
		s.note("streams: no deleted stream to create again, skipped")
		return nil
	}
	return s.createDyn(ctx, gone[e.target%len(gone)], true)
}

// liveDynLocked lists the class's incarnations not deleted (under smu).
func (s *soak) liveDynLocked() []*soakStream {
	var out []*soakStream
	for _, st := range s.dyn {
		if st.deleted.IsZero() {
			out = append(out, st)
		}
	}
	return out
}

// dynLive is the incarnation of name not deleted, nil if none (under smu).
func (s *soak) dynLive(name string) *soakStream {
	for _, st := range s.dyn {
		if st.name == name && st.deleted.IsZero() {
			return st
		}
	}
	return nil
}

// createdByEarlierAttempt says a CreateStream of name refused as in use
// was carried out by an earlier attempt of the same call, which the
// emulator did not answer in time (the SDK sent it again): the name is
// CREATING or ACTIVE, not DELETING as the incarnation deleted before it.
func (s *soak) createdByEarlierAttempt(ctx context.Context, name string) bool {
	out, err := s.kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		return false
	}
	switch st := out.StreamDescriptionSummary.StreamStatus; st {
	case types.StreamStatusCreating, types.StreamStatusActive:
		s.note("streams: CreateStream of %s answered that the name is in use, by a stream %s: an earlier attempt of the call, not answered in time, created it", name, st)
		return true
	}
	return false
}

// createDyn creates stream name (again), waits until it is ACTIVE, and
// starts its producer. during says it is created while the instances run,
// so the new-stream bound is judged for it.
func (s *soak) createDyn(ctx context.Context, name string, during bool) error {
	s.smu.Lock()
	n := 1
	for _, st := range s.dyn {
		if st.name == name {
			n++
		}
	}
	s.smu.Unlock()
	st := &soakStream{name: name, label: dynLabel(name, n), shards: dynShards, keys: dynKeys, every: 250 * time.Millisecond, dyn: true, during: during}
	// A name being deleted is refused until the emulator is done with it.
	began := time.Now()
	for {
		err := s.outlastStalls(ctx, func() error {
			_, err := s.kc.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(dynShards)})
			return err
		})
		if err == nil {
			break
		}
		code := kinesisx.ErrorCode(err)
		if code == kinesisx.CodeResourceInUse && s.createdByEarlierAttempt(ctx, name) {
			break
		}
		if (code != kinesisx.CodeResourceInUse && code != "LimitExceededException") || time.Since(began) > time.Minute || ctx.Err() != nil {
			return fmt.Errorf("creating stream %s: %w", name, err)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	arn, err := s.waitActive(ctx, name)
	if err != nil {
		return err
	}
	st.store = s.base.Stream(arn)
	st.active = time.Now()
	conf := filepath.Join(s.cfg.Dir, "producer-"+strings.ReplaceAll(st.label, "#", "-")+".yaml")
	if err := os.WriteFile(conf, []byte(producerConfig(st, s.front.URL)), 0o600); err != nil {
		return err
	}
	c, err := s.launch(conf, strings.TrimSuffix(conf, ".yaml")+".log")
	if err != nil {
		return err
	}
	st.producer = c
	s.smu.Lock()
	s.dyn = append(s.dyn, st)
	s.smu.Unlock()
	if n > 1 {
		s.mu.Lock()
		s.windows = append(s.windows, recreatedWindow(st, began, st.active, s.plan.LeasePeriod))
		s.mu.Unlock()
	}
	if during {
		s.note("streams: created %s (incarnation %s, %d shards, keys %s*), ACTIVE after %v; its shards must be read within %v",
			name, st.label, dynShards, keyPrefix(st), st.active.Sub(began).Round(100*time.Millisecond), newStreamBound(s.plan.LeasePeriod))
	}
	return nil
}

// recreatedWindow covers the first deliveries of the shards of st, a name
// created again, from its creation (began) until every instance has seen
// its new creation time: one listing (dynDiscoveryInterval), one more for
// a listing that failed, and the lease period for the shards that the
// clear's fenced leases free. Until an instance sees the new creation
// time, a reader of the deleted incarnation may read on into the new one
// (the emulator serves a shard of the same name at the iterator's
// position); once it does, the group's state of the deleted stream is
// cleared and the shards are read again from the start, marked (the
// redelivery marks stay, checkpointer.Store.StreamCreated). Seed 5, 1 h:
// 44 such duplicates in four incarnations, first delivered 0.8 to 5 s
// after the creation, again 1.3 to 4.3 s later, every one marked.
func recreatedWindow(st *soakStream, began, active time.Time, lease time.Duration) Window {
	shards := make(map[string]bool, st.shards)
	for i := range st.shards {
		shards[fmt.Sprintf("%s/shardId-%012d", st.label, i)] = true
	}
	return Window{What: "recreated " + st.label, Kind: "recreated stream", Shards: shards, From: began, To: active.Add(2*dynDiscoveryInterval + lease)}
}

// shadowPatience is how long a deletion waits for the shadow's read of the
// stream, not counting the emulator's stalls (at most drainMax in all):
// one of 3 min 37 s, after one of 50 s, ended seed 9's hour with efo at
// 24 minutes.
const shadowPatience = 5 * time.Minute

// shadowOverdue says a deletion has waited too long for the shadow's read:
// waited since the producer stopped, stalled of it with the emulator
// stalled.
func shadowOverdue(waited, stalled time.Duration) bool {
	return waited-stalled > shadowPatience || waited > drainMax
}

// deleteDyn stops st's producer, waits until every record of it was
// delivered (or the bound passed), and deletes the stream.
func (s *soak) deleteDyn(ctx context.Context, st *soakStream) error {
	s.note("streams: stop the producer of %s, delete the stream once all it wrote is delivered", st.label)
	stopProducers([]*child{st.producer})
	from := time.Now()
	s.smu.Lock()
	st.drainFrom = from
	s.smu.Unlock()
	quietFor := time.Duration(0)
	// The emulator's stalls do not count toward the cap below: no reader
	// can read then (soak_emulator.go).
	stalled0 := s.emulatorStalledFor()
	for {
		sleepCtx(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return nil
		}
		s.smu.Lock()
		judged, unread := st.judgedAt.After(from), st.unread
		s.smu.Unlock()
		if judged && unread == 0 {
			break
		}
		if _, quiet := s.quietSince(st.label); quiet {
			quietFor += 500 * time.Millisecond
		}
		// Faults under way hold the bound's clock, up to twice the bound.
		if judged && (quietFor > dynDrainBound || time.Since(from)-(s.emulatorStalledFor()-stalled0) > 2*dynDrainBound) {
			s.note("streams: %s still has %d records undelivered %v after its producer stopped; deleted anyway", st.label, unread, time.Since(from).Round(time.Second))
			break
		}
		if shadowOverdue(time.Since(from), s.emulatorStalledFor()-stalled0) {
			return fmt.Errorf("the shadow did not read %s for %v after its producer stopped, %v of it with the emulator stalled (its last poll: %s)",
				st.label, time.Since(from).Round(time.Second), (s.emulatorStalledFor() - stalled0).Round(time.Second), s.shadowFailure(st.label))
		}
	}
	return s.removeDyn(ctx, st, from)
}

// removeDyn deletes st's stream. With the efo class the fan-out readers
// registered a consumer on the stream, and Kinesis refuses to delete a
// stream with consumers unless told to delete them too
// (ResourceInUseException), as an operator does. Kinesis then ends the
// deleted stream's subscriptions; kinesis-mock does not: a subscription
// polls the stream by its ARN, the same for the next incarnation, and
// carries its index into it, so a reader that has not yet seen the
// deletion is handed the new stream's records from the deleted shard's
// length on, having skipped those written before its next poll (seed 9,
// 1 h with efo: soak-dyn-2#2's first 8 records first delivered after its
// 27th, by a4, whose subscription was opened on the deleted incarnation).
// The soak ends them as Kinesis would: it cuts the fan-out connections
// once the deletion is in, and a reader's next subscription is refused
// (the stream, and with it the consumer, is gone).
//
// The soak is the only one to delete the class's streams, and deletes an
// incarnation once, so a DeleteStream answered "not found" was carried out
// by an earlier attempt of the same call that the emulator did not answer
// in time (seed 9, 1 h with efo: kinesis-mock stalled for 55 s, the SDK
// sent the call again after the soak's 20 s call timeout, and the soak
// ended on the second attempt's ResourceNotFoundException).
func (s *soak) removeDyn(ctx context.Context, st *soakStream, from time.Time) error {
	err := s.outlastStalls(ctx, func() error {
		_, err := s.kc.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(st.name), EnforceConsumerDeletion: aws.Bool(true)})
		return err
	})
	if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
		s.note("streams: DeleteStream of %s answered that the stream is not found: an earlier attempt of the call, not answered in time, deleted it", st.label)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("deleting stream %s: %w", st.name, err)
	}
	cut := ""
	if s.cutter != nil {
		// A cut is a fault for liveness, as the efo class's are.
		s.faultBegin("")
		n := s.cutter.Cut()
		s.cuts.Add(int64(n))
		s.faultEnd("")
		cut = fmt.Sprintf("; its subscriptions ended as Kinesis ends them (fan-out connections cut: %d)", n)
	}
	s.smu.Lock()
	st.deleted = time.Now()
	s.smu.Unlock()
	s.note("streams: deleted %s (incarnation %s), %v after its producer stopped%s", st.name, st.label, st.deleted.Sub(from).Round(100*time.Millisecond), cut)
	return nil
}

// stopDynProducers stops the producers of the class still writing, at the
// load's end.
func (s *soak) stopDynProducers() {
	s.smu.Lock()
	var ps []*child
	for _, st := range s.liveDynLocked() {
		if st.drainFrom.IsZero() {
			ps = append(ps, st.producer)
		}
	}
	s.smu.Unlock()
	stopProducers(ps)
}

// dynProducerEnded names an incarnation of the class whose producer ended
// before the soak stopped it, "" for none.
func (s *soak) dynProducerEnded() (string, error) {
	s.smu.Lock()
	defer s.smu.Unlock()
	for _, st := range s.liveDynLocked() {
		if !st.drainFrom.IsZero() {
			continue
		}
		select {
		case <-st.producer.done:
			return st.label, st.producer.err
		default:
		}
	}
	return "", nil
}

// instanceStreams is what the instances' `streams` lists, and the
// discovery fields with the class.
func (s *soak) instanceStreams() (list, discovery string) {
	var names []string
	for _, st := range s.streams {
		names = append(names, st.name)
	}
	if !s.on[ClassStreams] {
		return strings.Join(names, ", "), ""
	}
	names = append(names, `"`+dynPattern+`"`)
	return strings.Join(names, ", "), fmt.Sprintf("    stream_discovery_interval: %v\n    new_stream_start_position: trim_horizon\n    deleted_stream_retention: %v\n",
		dynDiscoveryInterval, dynRetention)
}

// liveStreams are the fixed streams and the class's incarnations not
// deleted; allStreams every incarnation ever, deleted or not.
func (s *soak) liveStreams() []*soakStream {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append(append([]*soakStream(nil), s.streams...), s.liveDynLocked()...)
}

func (s *soak) allStreams() []*soakStream {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append(append([]*soakStream(nil), s.streams...), s.dyn...)
}

// keyPrefix is the prefix of st's keys: its label's, without "soak-".
func keyPrefix(st *soakStream) string { return strings.TrimPrefix(st.label, "soak-") + "-k" }

// shadowFailure is why the shadow's last poll of a stream failed, or says
// that it did not fail.
func (s *soak) shadowFailure(label string) string {
	s.smu.Lock()
	defer s.smu.Unlock()
	if why := s.shadowFailed[label]; why != "" {
		return why
	}
	return "no error"
}
