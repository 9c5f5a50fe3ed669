package kinesisx

import (
	"bytes"
	"encoding/base64"
)

// A record's data is decoded as its base64 streams in: once the window
// holds more than a chunk of the string, its whole groups of four
// characters are decoded into the record's slice and dropped from the
// window. So reading a record holds its decoded data and about a chunk of
// its base64, not its whole base64 string in a window that doubles to hold
// it (2 MiB and 4 MiB of allocations for a record of 900 KB).

// dataSpare is the most capacity a record's slice may keep unused beyond
// its data, as a share of it: above that it is copied to its size.
const dataSpare = 8 // an eighth

// data reads a record's base64 data, decoded into a slice of its own, and
// takes it out of the skeleton.
func (d *streamScanner) data() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	// The window from i is the string's content, read and not yet decoded.
	d.skel = append(d.skel, d.buf[d.k:d.i]...)
	d.k = d.i
	var out []byte
	for j := d.i; ; {
		if !d.byteAt(&j) {
			return nil, d.giveUpData(out)
		}
		seg := d.buf[j:]
		n := bytes.IndexByte(seg, '"')
		if n >= 0 {
			seg = seg[:n]
		}
		for _, c := range seg {
			if c == '\\' || c < 0x20 {
				return nil, d.giveUpData(out)
			}
		}
		j += len(seg)
		if n >= 0 {
			var ok bool
			if out, ok = d.decodeData(out, j-d.i, true); !ok {
				return nil, d.giveUpData(out)
			}
			d.i, d.k = j+1, j // the closing quote stays in the skeleton
			break
		}
		if j-d.i >= streamChunk {
			var ok bool
			if out, ok = d.decodeData(out, (j-d.i)&^3, false); !ok {
				return nil, d.giveUpData(out)
			}
		}
	}
	if spare := cap(out) - len(out); spare > len(out)/dataSpare && spare > 4<<10 {
		out = append(make([]byte, 0, len(out)), out...)
	}
	if len(out) >= streamChunk/2 {
		d.lastData = len(out) // a record long enough to stream
	}
	if out == nil {
		out = []byte{} // empty data, as the SDK has it
	}
	out = out[:len(out):len(out)]
	d.cuts = append(d.cuts, len(d.skel))
	d.taken = append(d.taken, out)
	return out, true
}

// decodeData decodes the first n characters of the window's content into
// out and drops them from the window; last says they end the string (which
// may end in padding).
func (d *streamScanner) decodeData(out []byte, n int, last bool) ([]byte, bool) {
	src := d.buf[d.i : d.i+n]
	need := len(out) + base64.StdEncoding.DecodedLen(n)
	if need > cap(out) {
		out = d.growData(out, need, last)
	}
	m, err := base64.StdEncoding.Decode(out[len(out):need], src)
	if err != nil {
		return out, false
	}
	out = out[:len(out)+m]
	d.i += n
	d.k = d.i
	d.cut += int64(n)
	return out, true
}

// growData makes room for need bytes of data: the exact size at the
// string's end; while it streams, the size of the answer's previous
// record decoded this way, else 1 MiB (Kinesis' default largest record),
// at most what the rest of the body could hold; doubling past that.
func (d *streamScanner) growData(out []byte, need int, last bool) []byte {
	size := need
	if !last {
		size = max(need, 2*cap(out))
		if cap(out) == 0 {
			size = max(need, d.lastData)
			if d.lastData == 0 {
				size = max(need, 1<<20)
			}
		}
		if d.size > 0 {
			// Not beyond the rest of the body, decoded.
			rest := int64(len(out)) + int64(base64.StdEncoding.DecodedLen(len(d.buf)-d.i)) +
				int64(base64.StdEncoding.DecodedLen(int(max(d.size-d.total, 0))))
			size = max(need, int(min(int64(size), rest)))
		}
	}
	grown := make([]byte, len(out), size)
	copy(grown, out)
	return grown
}

// giveUpData ends a data string the codec does not take: what it decoded
// already goes back into the skeleton as the base64 it was (whole groups
// of four characters encode back to the same text), so that the body is
// rebuilt whole for the SDK. It returns false.
func (d *streamScanner) giveUpData(out []byte) bool {
	d.skel = base64.StdEncoding.AppendEncode(d.skel, out)
	d.cut -= int64(base64.StdEncoding.EncodedLen(len(out)))
	return false
}
