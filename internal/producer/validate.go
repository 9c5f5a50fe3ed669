package producer

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Entry is one user record to write.
type Entry struct {
	Data         []byte
	PartitionKey string
	// ExplicitHashKey, when set, picks the shard instead of the MD5 of the
	// partition key. It is a decimal integer in [0, 2^128).
	ExplicitHashKey string
}

// Size is what Kinesis counts against the record and request limits: the data
// plus the partition key, in bytes.
func (e Entry) Size() int { return len(e.Data) + len(e.PartitionKey) }

// Reasons a record can never be written. They are wrapped with the sizes and
// limits involved; test for them with errors.Is.
var (
	ErrEmptyPartitionKey   = errors.New("partition key is empty")
	ErrPartitionKeyTooLong = errors.New("partition key is too long")
	ErrPartitionKeyNotUTF8 = errors.New("partition key is not valid UTF-8")
	ErrInvalidHashKey      = errors.New("explicit hash key is not a decimal integer in [0, 2^128)")
	ErrRecordTooLarge      = errors.New("record is too large")
)

// Validate reports why e can never be written with records of at most
// maxRecordSize bytes, or nil.
func Validate(e Entry, maxRecordSize int) error {
	if e.PartitionKey == "" {
		return fmt.Errorf("%w: it must be 1 to %d characters", ErrEmptyPartitionKey, kinesisx.MaxPartitionKeyLength)
	}
	// Kinesis limits the key in Unicode characters, not bytes.
	// The request is JSON: a key that is not UTF-8 would be rewritten with
	// U+FFFD on the wire, land under another key (maybe on another shard)
	// and merge two keys' records, so it fails here instead.
	if !utf8.ValidString(e.PartitionKey) {
		return fmt.Errorf("%w: %q; build the key from text, or hex/base64-encode binary keys", ErrPartitionKeyNotUTF8, truncate(e.PartitionKey, 64))
	}
	if n := utf8.RuneCountInString(e.PartitionKey); n > kinesisx.MaxPartitionKeyLength {
		return fmt.Errorf("%w: %d characters, the limit is %d", ErrPartitionKeyTooLong, n, kinesisx.MaxPartitionKeyLength)
	}
	if e.ExplicitHashKey != "" && !validHashKey(e.ExplicitHashKey) {
		return fmt.Errorf("%w: %q", ErrInvalidHashKey, truncate(e.ExplicitHashKey, 64))
	}
	if size := e.Size(); size > maxRecordSize {
		return fmt.Errorf("%w: %d bytes of data and partition key, the limit (max_record_size) is %d", ErrRecordTooLarge, size, maxRecordSize)
	}
	return nil
}

// validHashKey matches the API's pattern `0|([1-9]\d{0,38})` and the range
// [0, 2^128-1]. Decimal strings of equal length compare like the numbers.
func validHashKey(s string) bool {
	if s == "0" {
		return true
	}
	if len(s) > len(kinesisx.MaxHashKey) || s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) < len(kinesisx.MaxHashKey) || s <= kinesisx.MaxHashKey
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
