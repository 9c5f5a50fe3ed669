package chaos

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
)

// shadowShard is what the soak has read of one shard straight from the
// emulator (behind the proxy), with when it first saw each record.
type shadowShard struct {
	id     string // stream/shard
	after  string // the last sequence number read
	done   bool   // closed and read to its end
	recs   []Record
	seenAt []time.Time
	next   int // index of the first record not yet first-delivered
	// strays counts the user records of stray aggregates (see addRecord),
	// foreign those of another incarnation of the stream (see add).
	strays, foreign int
	// seqs holds the sequence numbers of recs (without sub-sequences).
	seqs map[string]bool
	// parents are the ids (stream/shard) of the shard's parents, as the
	// listing names them: a child is read only once they are read to
	// their end (readFront).
	parents []string
}

// shadowReadLimit bounds the records of one GetRecords of the shadow: 20
// of soak-big's 96 KiB records are 2 MiB, where an unbounded answer of a
// backlog (up to 10 MiB) took a busy emulator longer than a poll's 20 s
// (seed 7949455874945913174 ended "could not be carried out").
const shadowReadLimit = 20

// shadowStreamBudget bounds what one poll spends on one stream: a stream
// that is slow to list or has a long backlog is read on in the next poll
// (from where this one stopped), and the streams after it are still read.
// With one limit for the whole poll, a busy emulator left the streams late
// in the poll unread for minutes: the 1 h soaks of seeds 1 and 2 on
// 2026-12-03 ended "could not be carried out" at 25 and 20 minutes, their
// shadow unable to list a stream of the streams class (reshards had grown
// soak-a and soak-kpl to 18 shards each, three soaks shared two cores).
const shadowStreamBudget = 20 * time.Second

// shadow reads every stream as the ground truth while the soak runs.
type shadow struct {
	kc *kinesis.Client
	// streamBudget is shadowStreamBudget unless a test sets it.
	streamBudget time.Duration
	shards       map[string]*shadowShard
	order        []string // first seen order, for reports
	// polledAt is, per stream label, when the last poll that read the
	// whole stream began.
	polledAt map[string]time.Time
	// turn rotates where each poll starts (pollOrder).
	turn int
	// failed is, per stream label, why its last poll failed ("" once one
	// succeeds): a stream the streams class waits on says why it is
	// unread.
	failed map[string]string
}

// records counts the records the shadow has read, of every shard.
func (sh *shadow) records() int {
	n := 0
	for _, ss := range sh.shards {
		n += len(ss.recs) + ss.strays
	}
	return n
}

// shadowRef is a stream the shadow reads: its name in the emulator, its
// label in the checks (soakStream.label), and gone once it was deleted
// (its shards stay as last read).
type shadowRef struct {
	name, label string
	gone        bool
}

// poll reads what is new in every shard of the streams not gone, each
// stream within its own budget. A stream that fails is left for the next
// poll, the others are read; the first error is returned.
func (sh *shadow) poll(ctx context.Context, streams []shadowRef) error {
	var first error
	sh.turn++
	for _, ref := range pollOrder(streams, sh.turn) {
		if ref.gone {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sctx, cancel := context.WithTimeout(ctx, cmp.Or(sh.streamBudget, shadowStreamBudget))
		err := sh.pollStream(sctx, ref)
		cancel()
		if sh.failed == nil {
			sh.failed = map[string]string{}
		}
		sh.failed[ref.label] = ""
		if err != nil {
			sh.failed[ref.label] = err.Error()
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (sh *shadow) pollStream(ctx context.Context, ref shadowRef) error {
	began := time.Now()
	shards, err := kinesisx.ListAllShards(ctx, sh.kc, ref.name)
	if err != nil {
		return fmt.Errorf("listing the shards of %s: %w", ref.name, err)
	}
	for _, s := range shards {
		id := ref.label + "/" + aws.ToString(s.ShardId)
		ss := sh.shards[id]
		if ss == nil {
			ss = &shadowShard{id: id}
			for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
				if aws.ToString(p) != "" {
					ss.parents = append(ss.parents, ref.label+"/"+aws.ToString(p))
				}
			}
			sh.shards[id] = ss
			sh.order = append(sh.order, id)
		}
		if !ss.done {
			if err := sh.read(ctx, ref.name, s, ss); err != nil {
				return err
			}
		}
	}
	if sh.polledAt == nil {
		sh.polledAt = map[string]time.Time{}
	}
	sh.polledAt[ref.label] = began
	return nil
}

func (sh *shadow) read(ctx context.Context, stream string, s types.Shard, ss *shadowShard) error {
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if ss.after != "" {
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(ss.after)
	}
	it, err := sh.kc.GetShardIterator(ctx, in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", ss.id, err)
	}
	iter := it.ShardIterator
	for iter != nil {
		out, err := sh.kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(shadowReadLimit)})
		if err != nil {
			return fmt.Errorf("reading %s: %w", ss.id, err)
		}
		now := time.Now()
		for _, rec := range out.Records {
			ss.after = aws.ToString(rec.SequenceNumber)
			if err := ss.addRecord(aws.ToString(rec.SequenceNumber), rec.Data, s.HashKeyRange, now); err != nil {
				return err
			}
		}
		if out.NextShardIterator == nil {
			ss.done = true
			return nil
		}
		if len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
			return nil
		}
		iter = out.NextShardIterator
	}
	return nil
}

// addRecord adds a stream record: its user records if it is a KPL
// aggregate, unless it is a stray. A stray is the copy of an aggregate the
// output grouped by a shard map from before a split: it landed on one
// child with members of the other, and the output sent its members again.
// Readers drop it whole (the input, as the KCL does, when one member's hash
// key is outside the shard's range), so it is not part of the stream a
// reader sees: it is counted apart, neither expected to be delivered nor
// checked for order (seen in the stream, its members came after later
// records of their keys read from the other child).
func (ss *shadowShard) addRecord(seq string, data []byte, rng *types.HashKeyRange, now time.Time) error {
	if !kpl.IsAggregated(data) {
		return ss.add(seq, data, now)
	}
	subs, err := kpl.Decode(data)
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", seq, ss.id, err)
	}
	if outsideRange(subs, rng) {
		ss.strays += len(subs)
		return nil
	}
	for i, sub := range subs {
		if err := ss.add(seq+"/"+strconv.Itoa(i), sub.Data, now); err != nil {
			return err
		}
	}
	return nil
}

// outsideRange reports whether a user record of subs has a hash key (its
// explicit one, else the MD5 of its partition key) outside rng.
func outsideRange(subs []kpl.Record, rng *types.HashKeyRange) bool {
	if rng == nil {
		return false
	}
	start, ok1 := new(big.Int).SetString(aws.ToString(rng.StartingHashKey), 10)
	end, ok2 := new(big.Int).SetString(aws.ToString(rng.EndingHashKey), 10)
	if !ok1 || !ok2 {
		return false
	}
	for _, sub := range subs {
		h, ok := new(big.Int).SetString(sub.ExplicitHashKey, 10)
		if !ok {
			sum := md5.Sum([]byte(sub.PartitionKey))
			h = new(big.Int).SetBytes(sum[:])
		}
		if h.Cmp(start) < 0 || h.Cmp(end) > 0 {
			return true
		}
	}
	return false
}

// add adds one user record. A record that names another incarnation of
// the stream (the streams class's producers write its label in `stream`)
// is left out: kinesis-mock serves a shard by name, so a shadow still
// reading an incarnation deleted since reads on into the next one created
// under the name (seed 6, 1 h: soak-dyn-3#9, deleted before its producer
// wrote anything, got 110 records of soak-dyn-3#10 from trim_horizon, and
// the soak failed it as deleted with 110 records undelivered; they were
// delivered, as #10's).
func (ss *shadowShard) add(seq string, data []byte, now time.Time) error {
	var d struct {
		Delivery
		Stream string `json:"stream"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("record %s of %s is not a soak record: %w", seq, ss.id, err)
	}
	if label, _, _ := strings.Cut(ss.id, "/"); d.Stream != "" && d.Stream != label {
		ss.foreign++
		return nil
	}
	ss.recs = append(ss.recs, Record{Shard: ss.id, Seq: seq, K: d.K, C: d.C, Poison: d.Poison})
	if ss.seqs == nil {
		ss.seqs = map[string]bool{}
	}
	plain, _, _ := strings.Cut(seq, "/")
	ss.seqs[plain] = true
	ss.seenAt = append(ss.seenAt, now)
	return nil
}

// all returns every record read, parents before children, each shard in
// sequence order, as Check wants the stream.
// A stream that is gone is as the shadow read it (the streams class's
// streams are never resharded).
func (sh *shadow) all(ctx context.Context, streams []shadowRef) ([]Record, error) {
	var out []Record
	for _, ref := range streams {
		if ref.gone {
			for _, id := range sh.order {
				if strings.HasPrefix(id, ref.label+"/") {
					out = append(out, sh.shards[id].recs...)
				}
			}
			continue
		}
		shards, err := kinesisx.ListAllShards(ctx, sh.kc, ref.name)
		if err != nil {
			return nil, err
		}
		for _, s := range producertest.LineageOrder(shards) {
			if ss := sh.shards[ref.label+"/"+aws.ToString(s.ShardId)]; ss != nil {
				out = append(out, ss.recs...)
			}
		}
	}
	return out, nil
}

// tailer reads the lines the instances appended to their delivery files
// since the last call.
type tailer struct {
	offsets map[string]int64
	partial map[string][]byte
}

func (t *tailer) read(paths []string) ([]Delivery, error) {
	var out []Delivery
	for _, p := range paths {
		f, err := os.Open(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(t.offsets[p], io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		t.offsets[p] += int64(len(b))
		b = append(t.partial[p], b...)
		cut := bytes.LastIndexByte(b, '\n')
		if cut < 0 {
			t.partial[p] = b
			continue
		}
		t.partial[p] = append([]byte(nil), b[cut+1:]...)
		ds, err := parseDeliveries(bytes.NewReader(b[:cut+1]))
		if err != nil {
			return nil, fmt.Errorf("reading deliveries of %s: %w", p, err)
		}
		out = append(out, ds...)
	}
	return out, nil
}

// rssMiB reads a process's resident set from /proc (0 if it cannot).
func rssMiB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.Atoi(string(f[0]))
				return kb / 1024
			}
		}
	}
	return 0
}

// alive says whether a process exists (a zombie counts).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// pollOrder is streams starting at turn (modulo their number). A poll has
// one time limit for all of them: starting each poll at the same stream, a
// slow one early in the list (a backlog of soak-big's large records on a
// busy emulator) used it up, every stream after it failed, and a stream
// the streams class waited on went unread for 5 minutes (seeds 1 and 2,
// 1 h, at 53.7 s and 33.4 s). Rotated, each stream comes first in turn.
func pollOrder(streams []shadowRef, turn int) []shadowRef {
	if len(streams) == 0 {
		return nil
	}
	at := turn % len(streams)
	return append(append(make([]shadowRef, 0, len(streams)), streams[at:]...), streams[:at]...)
}
