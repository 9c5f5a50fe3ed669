package kinesissim

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/bits"
	"sort"
	"strconv"
	"sync"
	"time"
)

// stream is one stream. Its shards never change after creation, so they
// are read without a lock; each shard's records have a lock of their own.
type stream struct {
	name    string
	arn     string
	gen     uint64 // tells a recreated stream's iterators from the old one's
	created time.Time
	mode    string
	tags    map[string]string
	// size is the width of every shard's hash range but the last,
	// floor(2^128 / len(shards)), as (hi, lo) words.
	sizeHi, sizeLo uint64
	// startSeq is the counter value every shard's sequence range starts at.
	startSeq uint64
	shards   []shard
}

// shard holds its records in one slice, in sequence order: an empty shard
// costs a lock and a slice header.
type shard struct {
	mu   sync.RWMutex
	recs []record
}

// record is one stored record. Its sequence number is the server's counter
// value when it was written, formatted only when it is sent.
type record struct {
	seq  uint64
	at   int64 // arrival, Unix milliseconds
	key  string
	data []byte
}

func newStream(name, arn string, gen uint64, shards int, created time.Time, startSeq uint64) *stream {
	st := &stream{name: name, arn: arn, gen: gen, created: created, mode: "PROVISIONED", startSeq: startSeq, shards: make([]shard, shards)}
	// Kinesis splits the hash key space evenly: shard i starts at
	// i*floor(2^128/n) and the last one ends at 2^128-1.
	size := new(big.Int).Lsh(big.NewInt(1), 128)
	size.Quo(size, big.NewInt(int64(shards)))
	if shards == 1 {
		// 2^128 has no room in two words; only shard 0's start (0) is
		// ever computed from it.
		size.Sub(size, big.NewInt(1))
	}
	st.sizeHi, st.sizeLo = words(size)
	return st
}

// words splits a value below 2^128 into its high and low 64 bits.
func words(v *big.Int) (hi, lo uint64) {
	var b [16]byte
	v.FillBytes(b[:])
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// shardID is the service's name for shard i of a created stream.
func shardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// shardIndex parses a shard ID of st (a shard of another form or number
// is not one of its shards).
func (st *stream) shardIndex(id string) (int, bool) {
	const prefix = "shardId-"
	if len(id) != len(prefix)+12 || id[:len(prefix)] != prefix {
		return 0, false
	}
	n, err := strconv.Atoi(id[len(prefix):])
	if err != nil || n < 0 || n >= len(st.shards) {
		return 0, false
	}
	return n, true
}

// hashStart returns shard i's starting hash key as (hi, lo).
func (st *stream) hashStart(i int) (hi, lo uint64) {
	h1, l := bits.Mul64(st.sizeLo, uint64(i))
	_, h2 := bits.Mul64(st.sizeHi, uint64(i))
	return h1 + h2, l
}

// hashRange returns shard i's hash key range in decimal.
func (st *stream) hashRange(i int) (start, end string) {
	hi, lo := st.hashStart(i)
	start = decimal128(hi, lo)
	if i == len(st.shards)-1 {
		return start, decimal128(^uint64(0), ^uint64(0))
	}
	hi, lo = st.hashStart(i + 1)
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	return start, decimal128(hi, lo)
}

func decimal128(hi, lo uint64) string {
	if hi == 0 {
		return strconv.FormatUint(lo, 10)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return new(big.Int).SetBytes(b[:]).String()
}

// shardFor returns the shard whose hash range holds the key (hi, lo).
func (st *stream) shardFor(hi, lo uint64) int {
	// The ranges are sorted: the shard is the last one starting at or
	// below the key.
	n := len(st.shards)
	i := sort.Search(n, func(j int) bool {
		shi, slo := st.hashStart(j)
		return shi > hi || (shi == hi && slo > lo)
	}) - 1
	return i
}

// partitionHash is the 128-bit MD5 of a partition key, as Kinesis maps
// keys to hash keys.
func partitionHash(key string) (hi, lo uint64) {
	sum := md5.Sum([]byte(key))
	return binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])
}

// parseHashKey parses an explicit hash key, a decimal in [0, 2^128-1].
func parseHashKey(s string) (hi, lo uint64, ok bool) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || v.Sign() < 0 || v.BitLen() > 128 {
		return 0, 0, false
	}
	hi, lo = words(v)
	return hi, lo, true
}

// Sequence numbers are 56 decimal digits, as the service's are: "49", then
// the counter zero-padded to 54 digits. Equal width keeps their order as
// strings the order as integers, which is how consumers compare them.
const (
	seqPrefix = "49"
	seqDigits = 56
)

func formatSeq(v uint64) string {
	var b [seqDigits]byte
	return string(appendSeq(b[:0], v))
}

func appendSeq(dst []byte, v uint64) []byte {
	dst = append(dst, seqPrefix...)
	var num [20]byte
	s := strconv.AppendUint(num[:0], v, 10)
	for i := len(seqPrefix) + len(s); i < seqDigits; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// parseSeq reads a sequence number this server issued.
func parseSeq(s string) (uint64, bool) {
	if len(s) != seqDigits || s[:len(seqPrefix)] != seqPrefix {
		return 0, false
	}
	v, err := strconv.ParseUint(s[len(seqPrefix):], 10, 64)
	return v, err == nil
}

// after returns the index of the first record with a sequence number of at
// least seq. The caller holds the lock.
func (sh *shard) after(seq uint64) int {
	return sort.Search(len(sh.recs), func(i int) bool { return sh.recs[i].seq >= seq })
}
