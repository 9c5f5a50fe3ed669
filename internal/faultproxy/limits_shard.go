package faultproxy

import (
	"bytes"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Per-shard limits of Kinesis Data Streams (provisioned mode).
const (
	ShardReadsPerSecond     = kinesisx.MaxGetRecordsPerSecond
	ShardReadBytesPerSecond = 2 << 20
	ShardRecordsPerSecond   = 1000
	ShardWriteBytesPerSec   = 1 << 20
)

// shardMapTTL is how long a stream's shard map is trusted; a reshard is
// seen within it.
const shardMapTTL = time.Second

// Limits switches on the per-shard limits of a Front. Over a limit, a
// GetRecords call is answered 400 ProvisionedThroughputExceededException and
// a PutRecords entry is refused (not written) with that error code in its
// result, as the service does. Windows are one second, sliding.
type Limits struct {
	// Reads enforces 5 GetRecords calls/s and 2 MiB/s read per shard. The
	// shard of a call is known from the iterator it uses, learnt from
	// GetShardIterator and earlier GetRecords answers.
	Reads bool
	// Writes enforces 1,000 records/s and 1 MiB/s (data plus partition key)
	// per shard. The shard of an entry is its hash key (explicit, or the MD5
	// of its partition key) against the stream's open shards.
	Writes bool
	// ReadsPerSecond, ReadBytesPerSecond, RecordsPerSecond and
	// WriteBytesPerSecond override the service's values when positive, so a
	// test reaches a limit with little data.
	ReadsPerSecond, ReadBytesPerSecond, RecordsPerSecond, WriteBytesPerSecond int
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (l Limits) readsPerSecond() int { return orDefault(l.ReadsPerSecond, ShardReadsPerSecond) }
func (l Limits) readBytesPerSecond() int {
	return orDefault(l.ReadBytesPerSecond, ShardReadBytesPerSecond)
}
func (l Limits) recordsPerSecond() int { return orDefault(l.RecordsPerSecond, ShardRecordsPerSecond) }
func (l Limits) writeBytesPerSecond() int {
	return orDefault(l.WriteBytesPerSecond, ShardWriteBytesPerSec)
}

// SetLimits installs the per-shard limits; the zero value removes them.
func (f *Front) SetLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = l
}

func (f *Front) limitsOn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limits.Writes
}

// stamp is one event in a window: a call or a record, with its bytes.
type stamp struct {
	at    time.Time
	bytes int
}

// shardWindow holds one shard's events of the last second.
type shardWindow struct {
	reads, readBytes, writes []stamp
}

func (f *Front) windowLocked(shard string) *shardWindow { return entryOf(f.shards, shard) }

// prune drops the events older than one second before now.
func prune(s []stamp, now time.Time) []stamp {
	i := 0
	for i < len(s) && now.Sub(s[i].at) >= time.Second {
		i++
	}
	return s[i:]
}

func sum(s []stamp) int {
	n := 0
	for _, e := range s {
		n += e.bytes
	}
	return n
}

func (w *shardWindow) allowRead(now time.Time, calls, bytesPerSec int) bool {
	w.reads, w.readBytes = prune(w.reads, now), prune(w.readBytes, now)
	if len(w.reads) >= calls || sum(w.readBytes) >= bytesPerSec {
		return false
	}
	w.reads = append(w.reads, stamp{at: now})
	return true
}

// unread takes back the last call allowed.
func (w *shardWindow) unread() {
	if n := len(w.reads); n > 0 {
		w.reads = w.reads[:n-1]
	}
}

func (w *shardWindow) addReadBytes(now time.Time, n int) {
	w.readBytes = append(w.readBytes, stamp{at: now, bytes: n})
}

func (w *shardWindow) allowWrite(now time.Time, size, records, bytesPerSec int) bool {
	w.writes = prune(w.writes, now)
	if len(w.writes)+1 > records || sum(w.writes)+size > bytesPerSec {
		return false
	}
	w.writes = append(w.writes, stamp{at: now, bytes: size})
	return true
}

// putEntry is the part of a PutRecords entry that picks its shard.
type putEntry struct {
	Data            []byte
	PartitionKey    string
	ExplicitHashKey string
}

// hashKey is the entry's position in the 128-bit hash key space.
func (e putEntry) hashKey() *big.Int {
	if e.ExplicitHashKey != "" {
		if h, ok := new(big.Int).SetString(e.ExplicitHashKey, 10); ok {
			return h
		}
	}
	sum := md5.Sum([]byte(e.PartitionKey))
	return new(big.Int).SetBytes(sum[:])
}

// shardRange is an open shard's hash key range, inclusive.
type shardRange struct {
	id         string
	start, end *big.Int
}

type shardMapEntry struct {
	at     time.Time
	ranges []shardRange
}

func (m *shardMapEntry) shardOf(h *big.Int) string {
	for _, r := range m.ranges {
		if h.Cmp(r.start) >= 0 && h.Cmp(r.end) <= 0 {
			return r.id
		}
	}
	return ""
}

// shardMap returns the open shards of the stream the request names, listed
// from the emulator at most once per shardMapTTL.
func (f *Front) shardMap(r *http.Request, req map[string]json.RawMessage) (*shardMapEntry, error) {
	var stream string
	if raw, ok := req["StreamARN"]; ok {
		_ = json.Unmarshal(raw, &stream)
	} else {
		_ = json.Unmarshal(req["StreamName"], &stream)
	}
	f.mu.Lock()
	m := f.maps[stream]
	f.mu.Unlock()
	if m != nil && f.now().Sub(m.at) < shardMapTTL {
		return m, nil
	}

	m = &shardMapEntry{at: f.now()}
	first := map[string]json.RawMessage{}
	for _, k := range []string{"StreamName", "StreamARN"} {
		if v, ok := req[k]; ok {
			first[k] = v
		}
	}
	page := first
	for {
		b, _ := json.Marshal(page)
		status, resp, err := f.call(r, "ListShards", b)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("listing shards of %s for the limits: status %d: %s", stream, status, resp)
		}
		var out struct {
			NextToken string
			Shards    []struct {
				ShardId             string
				HashKeyRange        struct{ StartingHashKey, EndingHashKey string }
				SequenceNumberRange struct {
					EndingSequenceNumber string
				}
			}
		}
		if err := json.Unmarshal(resp, &out); err != nil {
			return nil, fmt.Errorf("decoding the shards of %s: %w", stream, err)
		}
		for _, s := range out.Shards {
			if s.SequenceNumberRange.EndingSequenceNumber != "" {
				continue // closed: no longer written to
			}
			start, ok1 := new(big.Int).SetString(s.HashKeyRange.StartingHashKey, 10)
			end, ok2 := new(big.Int).SetString(s.HashKeyRange.EndingHashKey, 10)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("shard %s of %s has a malformed hash key range", s.ShardId, stream)
			}
			m.ranges = append(m.ranges, shardRange{id: s.ShardId, start: start, end: end})
		}
		if out.NextToken == "" {
			break
		}
		tok, _ := json.Marshal(out.NextToken)
		page = map[string]json.RawMessage{"NextToken": tok}
	}
	f.mu.Lock()
	f.maps[stream] = m
	f.mu.Unlock()
	return m, nil
}

// call sends an operation of the front's own to the emulator, with the
// client's headers (the emulators do not verify signatures).
func (f *Front) call(r *http.Request, op string, body []byte) (int, []byte, error) {
	u := *f.target
	u.Path = "/"
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("calling %s for the limits: %w", op, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// servePutRecordsLimited is the Proxy's PutRecords handling with the write
// limits applied per entry before the random refusals.
func (f *Front) servePutRecordsLimited(w http.ResponseWriter, r *http.Request, body []byte) {
	const op = "PutRecords"
	d := f.decide(op)
	if answerRequestFaults(w, r, op, body, d) {
		return
	}

	status, resp, err := f.putLimited(r, body, d.rule)
	if answerForwardFaults(w, d, err) {
		return
	}
	writeJSON(w, status, resp)
}

func (f *Front) putLimited(r *http.Request, body []byte, rule Rule) (int, []byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, nil, fmt.Errorf("decoding PutRecords request: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(req["Records"], &raw); err != nil {
		return 0, nil, fmt.Errorf("decoding PutRecords entries: %w", err)
	}
	m, err := f.shardMap(r, req)
	if err != nil {
		return 0, nil, err
	}

	refused := make([]json.RawMessage, len(raw)) // nil = forwarded
	var kept []json.RawMessage
	codes := rule.EntryFailCodes
	if len(codes) == 0 {
		codes = []string{CodeThrottled, CodeInternalFailure}
	}
	f.mu.Lock()
	now, lim := f.now(), f.limits
	for i, e := range raw {
		var pe putEntry
		_ = json.Unmarshal(e, &pe)
		shard := m.shardOf(pe.hashKey())
		if shard != "" && !f.windowLocked(shard).allowWrite(now, len(pe.Data)+len(pe.PartitionKey), lim.recordsPerSecond(), lim.writeBytesPerSecond()) {
			f.fstats.RecordsThrottled++
			refused[i] = entryError(CodeThrottled, fmt.Sprintf("Rate exceeded for shard %s in stream under account 000000000000.", shard))
			continue
		}
		if f.drawOne(rule.EntryFailRate) {
			refused[i] = entryError(codes[f.drawIndex(len(codes))], "Refused by the fault proxy.")
			continue
		}
		kept = append(kept, e)
	}
	f.mu.Unlock()
	f.Proxy.mu.Lock()
	st := f.statsLocked("PutRecords")
	st.EntriesRefused += len(raw) - len(kept)
	st.EntriesForwarded += len(kept)
	f.Proxy.mu.Unlock()

	out := map[string]json.RawMessage{}
	var results []json.RawMessage
	if len(kept) > 0 {
		if req["Records"], err = json.Marshal(kept); err != nil {
			return 0, nil, err
		}
		fwd, err := json.Marshal(req)
		if err != nil {
			return 0, nil, err
		}
		status, _, resp, err := f.forward(r, "PutRecords", fwd)
		if err != nil || status != http.StatusOK {
			// The emulator's own error stands for the whole request.
			return status, resp, err
		}
		if err := json.Unmarshal(resp, &out); err != nil {
			return 0, nil, fmt.Errorf("decoding PutRecords answer: %w", err)
		}
		if err := json.Unmarshal(out["Records"], &results); err != nil {
			return 0, nil, fmt.Errorf("decoding PutRecords results: %w", err)
		}
		if len(results) != len(kept) {
			return 0, nil, errors.New("the emulator answered a different number of results than entries")
		}
	}
	spliced := make([]json.RawMessage, len(raw))
	failed, next := 0, 0
	for i := range raw {
		if refused[i] != nil {
			spliced[i] = refused[i]
			failed++
			continue
		}
		spliced[i] = results[next]
		if bytes.Contains(results[next], []byte(`"ErrorCode"`)) {
			failed++
		}
		next++
	}
	if out["Records"], err = json.Marshal(spliced); err != nil {
		return 0, nil, err
	}
	out["FailedRecordCount"] = json.RawMessage(fmt.Sprint(failed))
	resp, err := json.Marshal(out)
	return http.StatusOK, resp, err
}

func (p *Proxy) drawIndex(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

func entryError(code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"ErrorCode": code, "ErrorMessage": msg})
	return b
}
