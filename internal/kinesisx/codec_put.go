package kinesisx

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// AppendPutRecords appends the JSON body of in (its records and stream) to
// dst and returns the result. It ignores DryRun and StreamId.
func AppendPutRecords(dst []byte, in *kinesis.PutRecordsInput) []byte {
	n := len(`{"Records":[],"StreamARN":"","StreamName":""}`) + len(deref(in.StreamARN)) + len(deref(in.StreamName))
	for i := range in.Records {
		r := &in.Records[i]
		n += len(`{"Data":"","ExplicitHashKey":"","PartitionKey":""},`) +
			base64.StdEncoding.EncodedLen(len(r.Data)) + len(deref(r.ExplicitHashKey)) + len(deref(r.PartitionKey))
	}
	// Keys that need escaping grow it once more; they are rare.
	dst = growTo(dst, n)

	dst = append(dst, '{')
	comma := false
	if in.Records != nil {
		dst = append(dst, `"Records":[`...)
		for i := range in.Records {
			r := &in.Records[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			inner := false
			if r.Data != nil {
				dst = append(dst, `"Data":"`...)
				dst = base64.StdEncoding.AppendEncode(dst, r.Data)
				dst = append(dst, '"')
				inner = true
			}
			dst, inner = appendMember(dst, inner, "ExplicitHashKey", r.ExplicitHashKey)
			dst, _ = appendMember(dst, inner, "PartitionKey", r.PartitionKey)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
		comma = true
	}
	dst, comma = appendMember(dst, comma, "StreamARN", in.StreamARN)
	dst, _ = appendMember(dst, comma, "StreamName", in.StreamName)
	return append(dst, '}')
}

// appendMember appends "name":"v" when v is set, after a comma when comma
// is set, and reports whether the next member needs a comma.
func appendMember(dst []byte, comma bool, name string, v *string) ([]byte, bool) {
	if v == nil {
		return dst, comma
	}
	if comma {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return appendJSONString(dst, *v), true
}

// appendJSONString appends s as a JSON string. Printable ASCII other than
// the quote and the backslash is copied as it is; anything else is left to
// encoding/json, which escapes control characters and replaces invalid
// UTF-8 with U+FFFD, as the SDK's encoder does.
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

func growTo(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// decodePutRecordsOutput fills out from the JSON answer body and reports
// whether it could; on false, out may hold part of the answer. The strings
// of out share body's memory, which must not change afterwards (an
// answer's body is read into a buffer of its own and only read).
func decodePutRecordsOutput(body []byte, out *kinesis.PutRecordsOutput) bool {
	d := jsonScanner{s: unsafe.String(unsafe.SliceData(body), len(body))}
	ok := d.object(func(key string) bool {
		switch key {
		case "Records":
			// Room for every result and two strings each, so that neither
			// grows: the answer holds at least one '{' per result.
			n := strings.Count(d.s, "{")
			out.Records = make([]types.PutRecordsResultEntry, 0, n)
			d.strs = make([]string, 0, 2*n)
			return d.array(func() bool {
				var r types.PutRecordsResultEntry
				if !d.object(func(key string) bool {
					switch key {
					case "SequenceNumber":
						return d.stringPtr(&r.SequenceNumber)
					case "ShardId":
						return d.stringPtr(&r.ShardId)
					case "ErrorCode":
						return d.stringPtr(&r.ErrorCode)
					case "ErrorMessage":
						return d.stringPtr(&r.ErrorMessage)
					}
					return false // a field this codec does not know: the SDK reads the answer
				}) {
					return false
				}
				out.Records = append(out.Records, r)
				return true
			})
		case "FailedRecordCount":
			n, ok := d.int32()
			out.FailedRecordCount = &n
			return ok
		case "EncryptionType":
			v, ok := d.string()
			out.EncryptionType = types.EncryptionType(v)
			return ok
		}
		return false // a field this codec does not know: the SDK reads the answer
	})
	d.space()
	return ok && d.i == len(d.s)
}
