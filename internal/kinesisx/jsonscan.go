package kinesisx

import (
	"strconv"
	"strings"
)

// jsonScanner reads the JSON of a PutRecords or GetRecords answer. It takes
// strings without escapes only (whatever it cannot take makes it fail, and
// the caller falls back to the SDK), so every string it returns is a slice
// of the body.
type jsonScanner struct {
	s string
	i int
	// strs holds the strings the results point to.
	strs []string
}

func (d *jsonScanner) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

// next skips white space and consumes c if it comes next.
func (d *jsonScanner) next(c byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object, calling member with each key; member reads the
// value.
func (d *jsonScanner) object(member func(key string) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		key, ok := d.string()
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
func (d *jsonScanner) array(elem func() bool) bool {
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

// string reads a string without escapes.
func (d *jsonScanner) string() (string, bool) {
	if !d.next('"') {
		return "", false
	}
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			v := d.s[d.i:j]
			d.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// stringPtr reads a string or null into *p.
func (d *jsonScanner) stringPtr(p **string) bool {
	if d.literal("null") {
		*p = nil
		return true
	}
	v, ok := d.string()
	if len(d.strs) < cap(d.strs) {
		d.strs = append(d.strs, v)
		*p = &d.strs[len(d.strs)-1]
	} else {
		*p = &v
	}
	return ok
}

// number reads a number and returns it as written.
func (d *jsonScanner) number() (string, bool) {
	d.space()
	n := jsonNumberLen(d.s[d.i:])
	if n == 0 {
		return "", false
	}
	v := d.s[d.i : d.i+n]
	d.i += n
	return v, true
}

// jsonNumberLen is the length of the JSON number s starts with, or 0:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumberLen(s string) int {
	i := 0
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return 0
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}

func (d *jsonScanner) int32() (int32, bool) {
	n, ok := d.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 32)
	return int32(v), err == nil
}

func (d *jsonScanner) literal(word string) bool {
	d.space()
	if strings.HasPrefix(d.s[d.i:], word) {
		d.i += len(word)
		return true
	}
	return false
}
