package coordinator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// The simulation's streams. Every instance reads two streams of one
// account: "s", named in its config and read from start to end, and "f",
// found by its discovery (Follow), as the input's patterns of `streams`
// find it. Two faults act on "f": it stops matching the patterns (and
// matches again later), so that every instance's Follow removes it, and it
// is deleted and created again under its name, so that every instance
// reads the new stream from its first record. The old stream's unread
// records went with it: they are not counted lost. A soft stop can land
// while a removal waits for its in-flight batches; the stop then releases
// the leases of the other streams all the same.

// csimGenSeq separates the sequence numbers of a stream's incarnations:
// record i of shard n of incarnation g has g*csimGenSeq + n*1e6 + i, so
// that a commit names the incarnation it belongs to, as a recreated
// stream's sequence numbers (later in time) differ from the old one's.
const csimGenSeq = 1_000_000_000

// csimStream is one stream of the account. gen, api, listed and created
// are read under the simulation's lock: a recreate changes them while the
// instances read them.
type csimStream struct {
	name string
	// followed streams are found by discovery; listed says whether the
	// discovery lists it now.
	followed, listed bool
	gen              int
	created          time.Time
	api              *consumertest.Kinesis
	// apis are the incarnations by gen, createdOf their creation times
	// (zero for the named stream, which is never created again).
	apis      map[int]*consumertest.Kinesis
	createdOf map[int]time.Time
	store     *consumertest.Store
	// shards are the current incarnation's shards in order of creation;
	// open the ones that take writes. Only the schedule's goroutine
	// reads and writes them.
	shards []string
	open   map[string]bool
}

// csimKey names a shard of one incarnation of a stream in the records'
// data and the simulation's maps.
func csimKey(stream string, gen int, shard string) string {
	return fmt.Sprintf("%s.%d:%s", stream, gen, shard)
}

// addStream adds a stream to the account: "s" as the first, whose Kinesis
// is s.api, and followed ones after it.
func (s *csim) addStream(name string, followed bool) *csimStream {
	st := &csimStream{name: name, followed: followed, listed: followed, store: consumertest.NewStore(csimPeriod), open: map[string]bool{}, apis: map[int]*consumertest.Kinesis{}, createdOf: map[int]time.Time{}}
	if s.acct == nil {
		s.acct = newStreamsAPI()
	}
	if followed {
		st.created = time.Now().Truncate(time.Second)
		st.api = s.acct.create(name, 0, 0, st.created)
		st.gen = s.acct.gen[name]
	} else {
		st.api = s.api
		s.acct.mu.Lock()
		s.acct.by[name] = s.api
		s.acct.mu.Unlock()
	}
	st.apis[st.gen] = st.api
	st.createdOf[st.gen] = st.created
	s.streams = append(s.streams, st)
	return st
}

// stream returns the stream of a name, or of a key (its ARN).
func (s *csim) stream(nameOrKey string) *csimStream {
	name := strings.TrimPrefix(nameOrKey, consumertest.FakeARNPrefix)
	for _, st := range s.streams {
		if st.name == name {
			return st
		}
	}
	return nil
}

// current returns a stream's incarnation and its Kinesis.
func (s *csim) current(st *csimStream) (int, *consumertest.Kinesis) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.gen, st.api
}

// newShard adds a shard with parents to the stream's current incarnation.
func (s *csim) newShard(st *csimStream, parent, adjacent string) string {
	id := s.shardNum(len(st.shards))
	_, api := s.current(st)
	api.Add(id, &consumertest.KinesisShard{Parent: parent, Adjacent: adjacent, Keys: s.keys})
	st.shards = append(st.shards, id)
	st.open[id] = true
	return id
}

func (st *csimStream) openShards() []string {
	var out []string
	for _, id := range st.shards {
		if st.open[id] {
			out = append(out, id)
		}
	}
	return out
}

// listed is what the instances' discovery finds now.
func (s *csim) listed() []Found {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Found
	for _, st := range s.streams {
		if st.followed && st.listed {
			out = append(out, Found{Name: st.name, Key: consumertest.FakeARNPrefix + st.name, Created: st.created, Start: consumer.StartTrimHorizon})
		}
	}
	return out
}

// pokeDiscovery has every instance's discovery follow the listing now,
// rather than at its next interval.
func (s *csim) pokeDiscovery() {
	for _, in := range s.inst {
		if in != nil && in.poke != nil {
			select {
			case in.poke <- struct{}{}:
			default:
			}
		}
	}
}

// follow is the instance's discovery, as the input's (plugins/input
// discovery.go): every interval, and when poked, the consumer follows what
// the listing finds, until the stop tells it to end.
func (i *csimInst) follow(ctx context.Context) {
	defer close(i.followDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-i.poke:
		}
		// The listing is a Kinesis call: held while the instance is
		// paused, failed once it is dead.
		if err := i.gate(ctx); err != nil {
			return
		}
		_ = i.c.Follow(ctx, i.sim.listed())
		// Pokes bring the faults' changes at once; the interval is
		// long, since every Follow costs the bubble a round of work.
		t.Reset(4 * csimPeriod)
	}
}

// unlist: the followed stream stops matching the patterns, or matches
// them again.
func (s *csim) unlist(st *csimStream) {
	s.mu.Lock()
	st.listed = !st.listed
	s.mu.Unlock()
	s.logf("%s listed: %v", st.name, st.listed)
	s.pokeDiscovery()
}

// recreate deletes the followed stream and creates it again under its
// name, with one shard and no records.
func (s *csim) recreate(st *csimStream) {
	created := time.Now().Truncate(time.Second)
	if !created.After(st.created) {
		created = st.created.Add(time.Second)
	}
	api := s.acct.create(st.name, 0, 0, created)
	s.mu.Lock()
	st.api, st.created = api, created
	st.gen = s.acct.gen[st.name]
	st.apis[st.gen] = api
	st.createdOf[st.gen] = created
	for k := range s.marks {
		if strings.HasPrefix(k, st.name+"/") {
			delete(s.marks, k)
		}
	}
	s.mu.Unlock()
	st.shards, st.open = nil, map[string]bool{}
	s.newShard(st, "", "")
	s.logf("%s deleted and created again (incarnation %d)", st.name, st.gen)
	s.pokeDiscovery()
}

// closedRecords is how many records the shard had in the newest
// incarnation that closed it, and that incarnation: the close a reader of
// an older incarnation finishes after a recreate is checked against its
// own.
func (s *csim) closedRecords(st *csimStream, shard string) (gen, n int, ok bool) {
	s.mu.Lock()
	top := st.gen
	apis := st.apis
	s.mu.Unlock()
	for g := top; g >= 0; g-- {
		api := apis[g]
		if api == nil {
			continue
		}
		api.Mu.Lock()
		sh := api.Shards[shard]
		if sh != nil && sh.Closed {
			n, ok = sh.Records, true
		}
		api.Mu.Unlock()
		if ok {
			return g, n, true
		}
	}
	return 0, 0, false
}

// readUnder returns the lease a batch of incarnation gen of st was read
// under, as the store holds it, and which state it was found in. It is
// the store's lease of the shard, unless the store's state belongs to a
// stream created after gen's: then the stream was deleted and created
// again, the clear of its state (StreamCreated) fenced the lease for
// commits, and only its holder can still deliver what it read of the
// deleted stream, within the lease's term. It is judged by the lease as
// that clear found it, in the state of the newest stream no later than
// gen's (a stream created again twice before a take saw the middle one
// was never the store's). Called with the store's lock and the
// simulation's held.
func (s *csim) readUnder(st *csimStream, gen int, shard string) (l consumer.Lease, ok bool, state string) {
	f := st.store
	created := st.createdOf[gen]
	if f.Created.IsZero() || created.IsZero() || !f.Created.After(created) {
		l, ok = f.LeaseMap[shard]
		return l, ok, "the store's"
	}
	best, found := int64(0), false
	for at := range f.Fenced {
		if at <= created.UnixNano() && (!found || at > best) {
			best, found = at, true
		}
	}
	if !found {
		return consumer.Lease{}, false, fmt.Sprintf("incarnation %d's (none fenced)", gen)
	}
	l, ok = f.Fenced[best][shard]
	return l, ok, fmt.Sprintf("incarnation %d's, as the re-create fenced it", gen)
}

// checkIncarnation: once a shard's record of a newer incarnation was
// delivered, nothing of an older one is delivered again. Called with the
// simulation's lock held.
func (s *csim) checkIncarnation(in *csimInst, b *consumer.Batch) {
	for _, r := range b.Records {
		key, n := csimRecord(r)
		stream, rest, _ := strings.Cut(key, ".")
		num, shard, _ := strings.Cut(rest, ":")
		gen, _ := strconv.Atoi(num)
		id := stream + "/" + shard
		if newest, ok := s.newestGen[id]; ok && gen < newest {
			s.failLocked("recreate: %s delivered %s/%d of a deleted incarnation after incarnation %d's records", in.id, key, n, newest)
		}
		if gen > s.newestGen[id] {
			s.newestGen[id] = gen
		}
	}
}

// releasedAll: a soft stop that ended in time released every lease the
// instance held, in every stream, whatever its output did: a reader waits
// for its in-flight batches at most handoff_timeout, and the stop's
// deadline is past that, a stream being removed meanwhile or not.
func (s *csim) releasedAll(in *csimInst, removing []string) {
	for _, st := range s.streams {
		st.store.Mu.Lock()
		for shard, l := range st.store.LeaseMap {
			if l.Owner == in.id && csimLive(l) {
				s.fail("stop: %s stopped (a removal of %v under way) but left its lease of %s/%s to lapse (expires in %v)", in.id, removing, st.name, shard, time.Until(l.ExpiresAt))
			}
		}
		st.store.Mu.Unlock()
	}
}

// csimAccount is the account as one instance sees it: held while the
// instance is paused and failed once it is dead, with every record's data
// and sequence number naming its stream's incarnation.
type csimAccount struct {
	in *csimInst
	a  *streamsAPI
}

func (k *csimAccount) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, opts ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := k.in.gate(ctx); err != nil {
		return nil, err
	}
	return k.a.DescribeStreamSummary(ctx, in, opts...)
}

func (k *csimAccount) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := k.in.gate(ctx); err != nil {
		return nil, err
	}
	name := aws.ToString(in.StreamName)
	if in.StreamARN != nil {
		name = strings.TrimPrefix(aws.ToString(in.StreamARN), consumertest.FakeARNPrefix)
	}
	if in.NextToken != nil {
		name, _, _ = strings.Cut(aws.ToString(in.NextToken), "|")
	}
	k.a.mu.Lock()
	gen := k.a.gen[name]
	k.a.mu.Unlock()
	out, err := k.a.ListShards(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	for _, sh := range out.Shards {
		if r := sh.SequenceNumberRange; r != nil {
			r.StartingSequenceNumber = csimSeq(r.StartingSequenceNumber, gen)
			r.EndingSequenceNumber = csimSeq(r.EndingSequenceNumber, gen)
		}
	}
	return out, nil
}

func (k *csimAccount) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := k.in.gate(ctx); err != nil {
		return nil, err
	}
	return k.a.GetShardIterator(ctx, in, opts...)
}

func (k *csimAccount) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := k.in.gate(ctx); err != nil {
		return nil, err
	}
	out, err := k.a.GetRecords(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	parts := strings.SplitN(aws.ToString(in.ShardIterator), "|", 3)
	gen, _ := strconv.Atoi(parts[1])
	for j := range out.Records {
		r := &out.Records[j]
		r.Data = []byte(fmt.Sprintf("%s.%d:%s", parts[0], gen, r.Data))
		r.SequenceNumber = csimSeq(r.SequenceNumber, gen)
	}
	return out, nil
}

// csimSeq is the fake's sequence number in incarnation gen.
func csimSeq(seq *string, gen int) *string {
	if seq == nil {
		return nil
	}
	n, err := strconv.Atoi(*seq)
	if err != nil {
		return seq
	}
	return aws.String(strconv.Itoa(gen*csimGenSeq + n))
}

// csimRemoving names the streams c is removing now.
func csimRemoving(c *Consumer) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for co := range c.removing {
		out = append(out, co.streamName)
	}
	return out
}

// stuckInFlight makes the instance's output stuck and writes records to
// a shard of the stream about to go and, one time in two, of every other
// stream, then lets the readers fetch them for a while. With nothing in
// flight elsewhere, a stop's other streams are done at once, while the
// removal still waits for its batches.
func (s *csim) stuckInFlight(in *csimInst, gone *csimStream, st csimStep) {
	in.out.Store(int32(outStuck))
	in.stuck.Store(true)
	for _, strm := range s.streams {
		open := strm.openShards()
		if len(open) == 0 || (strm != gone && st.Shard%2 == 1) {
			continue
		}
		_, api := s.current(strm)
		api.Mu.Lock()
		api.Shards[open[st.Shard%len(open)]].Records += st.N
		api.Mu.Unlock()
	}
	time.Sleep(st.D)
}
