package kinesisx

import (
	"bytes"
	"encoding/base64"
	"io"
	"unsafe"
)

// streamScanner reads the JSON of a GetRecords answer as it streams in,
// through a window that holds the token being read (of a record's data,
// about a chunk: it is decoded as it streams in, jsondata.go) instead of
// the whole body. What it reads is also kept, except the
// record data it took out (decoded), so that an answer it cannot take can
// be rebuilt whole for the SDK (skeleton). Like jsonScanner it takes
// strings without escapes only.
type streamScanner struct {
	r   io.Reader
	buf []byte // the window: buf[i:] is not read yet
	i   int
	k   int // buf[k:i] is read and not yet in skel
	eof bool
	err error // a read error other than io.EOF
	// size is the body's length if known (else 0); total counts the
	// bytes read from r, cut the bytes of data strings taken out.
	size, total, cut int64

	skel []byte
	// cuts are the offsets in skel where the base64 of taken[j] belongs.
	cuts  []int
	taken [][]byte
	// lastData is the length of the last record data decoded as it
	// streamed in (jsondata.go): the next one's likely size.
	lastData int
}

// streamChunk is the least a read asks the body for.
const streamChunk = 32 << 10

// fill reads more of the body into the window, keeping buf[i:] (moved to
// the front: indexes past i shift down by the returned amount). It returns
// false at the end of the body or on a read error.
func (d *streamScanner) fill() (shift int, more bool) {
	if d.eof || d.err != nil {
		return 0, false
	}
	d.skel = append(d.skel, d.buf[d.k:d.i]...)
	shift = d.i
	n := copy(d.buf, d.buf[d.i:])
	d.buf = d.buf[:n]
	d.i, d.k = 0, 0
	if cap(d.buf)-n < streamChunk {
		grown := make([]byte, n, max(2*cap(d.buf), n+streamChunk))
		copy(grown, d.buf)
		d.buf = grown
	}
	for {
		m, err := d.r.Read(d.buf[n:cap(d.buf)])
		d.buf = d.buf[:n+m]
		d.total += int64(m)
		switch {
		case err == io.EOF:
			d.eof = true
		case err != nil:
			d.err = err
		}
		if m > 0 || d.eof || d.err != nil {
			return shift, m > 0
		}
	}
}

// byteAt makes sure the window holds buf[j] (j at or after i), reading
// more as needed; j is moved with the window.
func (d *streamScanner) byteAt(j *int) bool { return *j < len(d.buf) || d.more(j) }

func (d *streamScanner) more(j *int) bool {
	for *j >= len(d.buf) {
		shift, more := d.fill()
		*j -= shift
		if !more && *j >= len(d.buf) {
			return false
		}
	}
	return true
}

func (d *streamScanner) space() {
	if d.i < len(d.buf) && d.buf[d.i] > ' ' {
		return
	}
	for j := d.i; d.byteAt(&j); j++ {
		if c := d.buf[j]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			d.i = j
			return
		}
		d.i = j + 1
	}
}

// next skips white space and consumes c if it comes next.
func (d *streamScanner) next(c byte) bool {
	d.space()
	j := d.i
	if d.byteAt(&j) && d.buf[j] == c {
		d.i = j + 1
		return true
	}
	return false
}

// rawString reads a string without escapes and returns where its content
// lies in the window, valid until the window next moves.
func (d *streamScanner) rawString() (start, end int, ok bool) {
	if !d.next('"') {
		return 0, 0, false
	}
	for j := d.i; d.byteAt(&j); {
		seg := d.buf[j:]
		n := bytes.IndexByte(seg, '"')
		if n >= 0 {
			seg = seg[:n]
		}
		for _, c := range seg {
			if c == '\\' || c < 0x20 {
				return 0, 0, false
			}
		}
		if n >= 0 {
			start, end = d.i, j+n
			d.i = end + 1
			return start, end, true
		}
		j += len(seg)
	}
	return 0, 0, false
}

// key reads an object's key: one of the names this codec knows, or "".
func (d *streamScanner) key() (string, bool) {
	s, e, ok := d.rawString()
	if !ok {
		return "", false
	}
	k := unsafe.String(unsafe.SliceData(d.buf[s:e]), e-s)
	for _, name := range getRecordsKeys {
		if k == name {
			return name, true
		}
	}
	return "", true
}

var getRecordsKeys = []string{"Records", "NextShardIterator", "MillisBehindLatest", "ChildShards",
	"Data", "PartitionKey", "SequenceNumber", "EncryptionType", "ApproximateArrivalTimestamp"}

// object reads an object, calling member with each key; member reads the
// value.
func (d *streamScanner) object(member func(key string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		key, ok := d.key()
		if !ok || !d.next(':') || !member(key) {
			return false
		}
		if d.next('}') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// array reads an array, calling elem to read each element.
func (d *streamScanner) array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.next(']') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// number reads a number and returns it as written, valid until the window
// next moves.
func (d *streamScanner) number() ([]byte, bool) {
	d.space()
	j := d.i
	for d.byteAt(&j) && isNumberByte(d.buf[j]) {
		j++
	}
	n := jsonNumberLen(unsafe.String(unsafe.SliceData(d.buf[d.i:j]), j-d.i))
	if n == 0 || n != j-d.i {
		return nil, false
	}
	v := d.buf[d.i:j]
	d.i = j
	return v, true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (d *streamScanner) literal(word string) bool {
	d.space()
	j := d.i
	for n := range len(word) {
		j = d.i + n
		if !d.byteAt(&j) || d.buf[j] != word[n] {
			return false
		}
	}
	d.i += len(word)
	return true
}

// sizeAfterFirst estimates, from the first record read, how many records
// the answer holds and how long its skeleton will be, so that they grow
// once rather than by doubling.
func (d *streamScanner) sizeAfterFirst() (records, skel int) {
	consumed := d.total - int64(len(d.buf)-d.i)
	if d.size <= 0 || consumed <= 0 {
		return 0, 0
	}
	n := min(d.size/consumed+1, MaxGetRecordsLimit+1)
	return int(n), int(min((consumed-d.cut)*n, d.size))
}

// body is the whole answer as the SDK would have read it: the skeleton
// with the data taken out encoded again (which the SDK decodes to the same
// bytes), and the rest of the body. Called once the scanner gave up.
func (d *streamScanner) body() ([]byte, error) {
	d.skel = append(d.skel, d.buf[d.k:]...)
	d.buf, d.k, d.i = nil, 0, 0
	if d.err != nil {
		return nil, d.err
	}
	if !d.eof {
		rest, err := io.ReadAll(d.r)
		if err != nil {
			return nil, err
		}
		d.skel = append(d.skel, rest...)
	}
	if len(d.cuts) == 0 {
		return d.skel, nil
	}
	size := len(d.skel)
	for _, t := range d.taken {
		size += base64.StdEncoding.EncodedLen(len(t))
	}
	out := make([]byte, 0, size)
	at := 0
	for j, cut := range d.cuts {
		out = append(out, d.skel[at:cut]...)
		out = base64.StdEncoding.AppendEncode(out, d.taken[j])
		at = cut
	}
	return append(out, d.skel[at:]...), nil
}

// strArena holds the keys and sequence numbers of one answer in a few
// blocks, so that they cost a few allocations, not two per record.
type strArena struct{ block []byte }

const arenaBlock = 16 << 10

func (a *strArena) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, max(arenaBlock, len(b)))
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return unsafe.String(&a.block[start], len(b))
}
