package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
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
}

// shadow reads every stream as the ground truth while the soak runs.
type shadow struct {
	kc     *kinesis.Client
	shards map[string]*shadowShard
	order  []string // first seen order, for reports
}

// poll reads what is new in every shard of the streams.
func (sh *shadow) poll(ctx context.Context, streams []string) error {
	for _, name := range streams {
		shards, err := kinesisx.ListAllShards(ctx, sh.kc, name)
		if err != nil {
			return fmt.Errorf("listing the shards of %s: %w", name, err)
		}
		for _, s := range shards {
			id := name + "/" + aws.ToString(s.ShardId)
			ss := sh.shards[id]
			if ss == nil {
				ss = &shadowShard{id: id}
				sh.shards[id] = ss
				sh.order = append(sh.order, id)
			}
			if !ss.done {
				if err := sh.read(ctx, name, s, ss); err != nil {
					return err
				}
			}
		}
	}
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
		out, err := sh.kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			return fmt.Errorf("reading %s: %w", ss.id, err)
		}
		now := time.Now()
		for _, rec := range out.Records {
			seq := aws.ToString(rec.SequenceNumber)
			ss.after = seq
			if kpl.IsAggregated(rec.Data) {
				subs, err := kpl.Decode(rec.Data)
				if err != nil {
					return fmt.Errorf("record %s of %s: %w", seq, ss.id, err)
				}
				for i, sub := range subs {
					if err := ss.add(seq+"/"+strconv.Itoa(i), sub.Data, now); err != nil {
						return err
					}
				}
				continue
			}
			if err := ss.add(seq, rec.Data, now); err != nil {
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

func (ss *shadowShard) add(seq string, data []byte, now time.Time) error {
	var d Delivery
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("record %s of %s is not a soak record: %w", seq, ss.id, err)
	}
	ss.recs = append(ss.recs, Record{Shard: ss.id, Seq: seq, K: d.K, C: d.C})
	ss.seenAt = append(ss.seenAt, now)
	return nil
}

// all returns every record read, parents before children, each shard in
// sequence order, as Check wants the stream.
func (sh *shadow) all(ctx context.Context, streams []string) ([]Record, error) {
	var out []Record
	for _, name := range streams {
		shards, err := kinesisx.ListAllShards(ctx, sh.kc, name)
		if err != nil {
			return nil, err
		}
		for _, s := range producertest.LineageOrder(shards) {
			if ss := sh.shards[name+"/"+aws.ToString(s.ShardId)]; ss != nil {
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
