package kinesissim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"time"
	"unicode/utf8"
)

// Service limits the simulator applies to requests.
const (
	iteratorLife       = 5 * time.Minute
	getRecordsMax      = 10000
	getRecordsMaxBytes = 10 << 20
	putRecordsMax      = 500
	putRecordsMaxBytes = 5 << 20
	recordMaxBytes     = 1 << 20
	partitionKeyMax    = 256
)

// iterator is a shard iterator's content: the shard, the first sequence
// counter value it reads from, and when it was issued. It is sent as
// base64 with a checksum, so nothing is held per iterator.
type iterator struct {
	gen    uint64
	shard  uint32
	from   uint64
	issued int64 // Unix milliseconds
}

const iteratorBytes = 8 + 4 + 8 + 8 + 4

func (it iterator) String() string {
	var b [iteratorBytes]byte
	binary.BigEndian.PutUint64(b[0:], it.gen)
	binary.BigEndian.PutUint32(b[8:], it.shard)
	binary.BigEndian.PutUint64(b[12:], it.from)
	binary.BigEndian.PutUint64(b[20:], uint64(it.issued))
	h := fnv.New32a()
	h.Write(b[:28])
	binary.BigEndian.PutUint32(b[28:], h.Sum32())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func parseIterator(s string) (iterator, bool) {
	var b [iteratorBytes]byte
	if base64.RawURLEncoding.DecodedLen(len(s)) != iteratorBytes {
		return iterator{}, false
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(s)); err != nil {
		return iterator{}, false
	}
	h := fnv.New32a()
	h.Write(b[:28])
	if binary.BigEndian.Uint32(b[28:]) != h.Sum32() {
		return iterator{}, false
	}
	return iterator{
		gen: binary.BigEndian.Uint64(b[0:]), shard: binary.BigEndian.Uint32(b[8:]),
		from: binary.BigEndian.Uint64(b[12:]), issued: int64(binary.BigEndian.Uint64(b[20:])),
	}, true
}

// shardOf finds a shard a request names.
func (s *Server) shardOf(name, arn, id string) (*stream, int, error) {
	st, err := s.lookup(name, arn)
	if err != nil {
		return nil, 0, err
	}
	i, ok := st.shardIndex(id)
	if !ok {
		return nil, 0, apiError{code: codeResourceNotFound, msg: fmt.Sprintf("Shard %s in stream %s under account %s does not exist", id, st.name, s.opts.AccountID)}
	}
	return st, i, nil
}

func (s *Server) getShardIterator(body []byte, a *answer) error {
	var in struct {
		streamRef
		ShardID                string    `json:"ShardId"`
		ShardIteratorType      string    `json:"ShardIteratorType"`
		StartingSequenceNumber string    `json:"StartingSequenceNumber"`
		Timestamp              epochTime `json:"Timestamp"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	st, i, err := s.shardOf(in.StreamName, in.StreamARN, in.ShardID)
	if err != nil {
		return err
	}
	sh := &st.shards[i]
	it := iterator{gen: st.gen, shard: uint32(i), issued: time.Now().UnixMilli()}
	switch in.ShardIteratorType {
	case "TRIM_HORIZON":
		it.from = st.startSeq
	case "LATEST":
		// Under the shard's lock, every sequence number the counter has
		// given this shard is in its records: the next record is after.
		sh.mu.RLock()
		it.from = s.seq.Load() + 1
		sh.mu.RUnlock()
	case "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER":
		seq, ok := parseSeq(in.StartingSequenceNumber)
		if ok {
			ok = s.seqOfShard(st, sh, seq)
		}
		if !ok {
			return apiError{code: codeInvalidArgument, msg: fmt.Sprintf("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream.", in.StartingSequenceNumber, in.ShardID, st.name, s.opts.AccountID)}
		}
		it.from = seq
		if in.ShardIteratorType == "AFTER_SEQUENCE_NUMBER" {
			it.from++
		}
	case "AT_TIMESTAMP":
		if !in.Timestamp.set {
			return apiError{code: codeInvalidArgument, msg: "AT_TIMESTAMP needs a Timestamp."}
		}
		ts := in.Timestamp.t.UnixMilli()
		sh.mu.RLock()
		j := sort.Search(len(sh.recs), func(k int) bool { return sh.recs[k].at >= ts })
		if j < len(sh.recs) {
			it.from = sh.recs[j].seq
		} else {
			it.from = s.seq.Load() + 1
		}
		sh.mu.RUnlock()
	default:
		return apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [AFTER_SEQUENCE_NUMBER, AT_SEQUENCE_NUMBER, AT_TIMESTAMP, TRIM_HORIZON, LATEST]", in.ShardIteratorType)}
	}
	b := append([]byte(`{"ShardIterator":"`), it.String()...)
	return a.raw(append(b, `"}`...))
}

// seqOfShard reports whether seq names a position of the shard: its
// starting sequence number, one of its records, or a number not given yet.
func (s *Server) seqOfShard(st *stream, sh *shard, seq uint64) bool {
	if seq == st.startSeq {
		return true
	}
	if seq < st.startSeq {
		return false
	}
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if seq > s.seq.Load() {
		return true
	}
	j := sh.after(seq)
	return j < len(sh.recs) && sh.recs[j].seq == seq
}

func (s *Server) getRecords(body []byte, a *answer) error {
	var in struct {
		ShardIterator string `json:"ShardIterator"`
		Limit         *int   `json:"Limit"`
		StreamARN     string `json:"StreamARN"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	limit := getRecordsMax
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > getRecordsMax {
			return apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and %d", *in.Limit, getRecordsMax)}
		}
		limit = *in.Limit
	}
	it, ok := parseIterator(in.ShardIterator)
	if !ok {
		return apiError{code: codeInvalidArgument, msg: "Invalid ShardIterator."}
	}
	now := time.Now()
	if now.Sub(time.UnixMilli(it.issued)) > iteratorLife {
		return apiError{code: codeExpiredIterator, msg: fmt.Sprintf("Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of 300000 milliseconds.", time.UnixMilli(it.issued).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	st, ok := s.streams.Load().byGen[it.gen]
	if !ok || int(it.shard) >= len(st.shards) {
		return apiError{code: codeResourceNotFound, msg: fmt.Sprintf("Shard %s in the iterator's stream under account %s does not exist", shardID(int(it.shard)), s.opts.AccountID)}
	}
	sh := &st.shards[it.shard]
	// Records are never changed once appended, so the ones to send are
	// read after the lock is let go.
	sh.mu.RLock()
	all := sh.recs
	sh.mu.RUnlock()
	first := sort.Search(len(all), func(k int) bool { return all[k].seq >= it.from })
	recs := all[first:min(len(all), first+limit)]
	size := 0
	for k, r := range recs {
		size += len(r.data) + len(r.key)
		if size > getRecordsMaxBytes && k > 0 {
			recs = recs[:k]
			break
		}
	}
	var behind int64
	if rest := all[first+len(recs):]; len(rest) > 0 {
		behind = max(1, now.UnixMilli()-rest[0].at)
	}
	next := it
	next.issued = now.UnixMilli()
	if len(recs) > 0 {
		next.from = recs[len(recs)-1].seq + 1
	}
	b := make([]byte, 0, 128+len(recs)*(110+seqDigits)+base64.StdEncoding.EncodedLen(size))
	b = append(b, `{"Records":[`...)
	for k, r := range recs {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"SequenceNumber":"`...)
		b = appendSeq(b, r.seq)
		b = append(b, `","ApproximateArrivalTimestamp":`...)
		b = appendEpoch(b, r.at)
		b = append(b, `,"Data":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.data)
		b = append(b, `","PartitionKey":`...)
		b = appendJSONString(b, r.key)
		b = append(b, '}')
	}
	b = append(b, `],"NextShardIterator":"`...)
	b = append(b, next.String()...)
	b = append(b, `","MillisBehindLatest":`...)
	b = fmt.Appendf(b, "%d}", behind)
	return a.raw(b)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

type putEntry struct {
	Data            []byte  `json:"Data"`
	PartitionKey    string  `json:"PartitionKey"`
	ExplicitHashKey *string `json:"ExplicitHashKey"`
}

// shard validates an entry as the service does (the whole request fails)
// and returns the shard it goes to.
func (e *putEntry) shard(st *stream, at string) (int, error) {
	if n := utf8.RuneCountInString(e.PartitionKey); n < 1 || n > partitionKeyMax {
		return 0, apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value at '%spartitionKey' failed to satisfy constraint: Member must have length between 1 and %d", at, partitionKeyMax)}
	}
	if len(e.Data)+len(e.PartitionKey) > recordMaxBytes {
		return 0, apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value at '%sdata' failed to satisfy constraint: Member must have length less than or equal to %d", at, recordMaxBytes)}
	}
	var hi, lo uint64
	if e.ExplicitHashKey != nil {
		var ok bool
		if hi, lo, ok = parseHashKey(*e.ExplicitHashKey); !ok {
			return 0, apiError{code: codeInvalidArgument, msg: fmt.Sprintf("Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was %s", *e.ExplicitHashKey)}
		}
	} else {
		hi, lo = partitionHash(e.PartitionKey)
	}
	return st.shardFor(hi, lo), nil
}

// put appends a record to shard i and returns its sequence number.
func (s *Server) put(st *stream, i int, key string, data []byte, at int64) uint64 {
	sh := &st.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The counter is taken under the shard's lock, so a shard's records
	// are appended in sequence order; arrival times never go back.
	seq := s.seq.Add(1)
	if n := len(sh.recs); n > 0 {
		at = max(at, sh.recs[n-1].at)
	}
	sh.recs = append(sh.recs, record{seq: seq, at: at, key: key, data: data})
	return seq
}

func (s *Server) putRecords(body []byte, a *answer) error {
	var in struct {
		streamRef
		Records []putEntry `json:"Records"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	if n := len(in.Records); n < 1 || n > putRecordsMax {
		return apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value at 'records' failed to satisfy constraint: Member must have length between 1 and %d", putRecordsMax)}
	}
	shards := make([]int, len(in.Records))
	total := 0
	for k := range in.Records {
		e := &in.Records[k]
		total += len(e.Data) + len(e.PartitionKey)
		if shards[k], err = e.shard(st, fmt.Sprintf("records.%d.member.", k+1)); err != nil {
			return err
		}
	}
	if total > putRecordsMaxBytes {
		return apiError{code: codeInvalidArgument, msg: fmt.Sprintf("Records size exceeds %d MB limit", putRecordsMaxBytes>>20)}
	}
	at := time.Now().UnixMilli()
	b := make([]byte, 0, 64+len(in.Records)*(60+seqDigits))
	b = append(b, `{"FailedRecordCount":0,"Records":[`...)
	for k := range in.Records {
		e := &in.Records[k]
		seq := s.put(st, shards[k], e.PartitionKey, e.Data, at)
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"SequenceNumber":"`...)
		b = appendSeq(b, seq)
		b = append(b, `","ShardId":"`...)
		b = append(b, shardID(shards[k])...)
		b = append(b, `"}`...)
	}
	b = append(b, `],"EncryptionType":"NONE"}`...)
	return a.raw(b)
}

func (s *Server) putRecord(body []byte, a *answer) error {
	var in struct {
		streamRef
		putEntry
		SequenceNumberForOrdering string `json:"SequenceNumberForOrdering"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	i, err := in.putEntry.shard(st, "")
	if err != nil {
		return err
	}
	seq := s.put(st, i, in.PartitionKey, in.Data, time.Now().UnixMilli())
	b := append([]byte(`{"ShardId":"`), shardID(i)...)
	b = append(b, `","SequenceNumber":"`...)
	b = appendSeq(b, seq)
	return a.raw(append(b, `","EncryptionType":"NONE"}`...))
}
