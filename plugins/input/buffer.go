package input

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// defaultMaxBufferedBytes fits a container of 512 MiB: the budget, plus
// about 100 MiB for the process itself, plus room for the pipeline.
const defaultMaxBufferedBytes = "256MiB"

func maxBufferedBytesField() *service.ConfigField {
	return service.NewAnyField(fieldMaxBufferedBytes).
		Description("The most bytes of records the input holds at once, all its streams and shards together: room for the call under way (an answer being fetched and decoded, a subscription's next event), records fetched and waiting to be handed over, and batches handed to the pipeline and not yet acknowledged (a nacked batch counts until it is acknowledged; a batch still in the pipeline when its shard's reader ends counts until its acknowledgement or nack). A record costs its data, key and sequence number plus 768 bytes, counted on the user records it becomes (a KPL aggregate costs what its user records cost). Above it, shards stop fetching and wait their turn, first come first served, so none starves: a shard holds room only for a call under way and gives it back when the call fails, so a shard whose reads keep failing (access denied, throttling) or that waits out a backoff holds none, and no shard asks for more than half the budget. A single answer larger than the whole budget still goes ahead, alone. With large records and a crowded budget a shard asks Kinesis for fewer records per call, at the same pace. " +
			"A size with a unit (`256MiB`, `1GiB`, `512KiB`, `64MB`) or a plain number of bytes; `0` removes the bound. " +
			"To size it: the process needs about this much plus 100 MiB for itself, plus what the pipeline keeps of its own (buffers, caches, windows), within the container's memory limit. Each shard catching up wants room for one answer of up to 10 MiB (Kinesis' largest) to read at full speed: the budget divided by the shard count is what each shard gets when all fall behind at once. " +
			"The gauges `kinesis_input_buffered_bytes`, `kinesis_input_max_buffered_bytes` and `kinesis_input_shards_waiting_for_buffer` show it, and a warning names the shards holding the room when no shard was let in for a minute, and another is logged when shards wait longer than `lag_warn_threshold`. An output `batching` policy must flush by `period` (or at a count the budget can hold): the budget is only freed by acknowledgements.").
		LintRule(lintByteSize).
		Default(defaultMaxBufferedBytes).Advanced()
}

// lintByteSize refuses what parseByteSize refuses: a negative number, or a
// string that is not a number with one of byteUnits.
var lintByteSize = lintrule.Field(
	lintrule.Check{
		When:    `this.type() == "number" && this < 0`,
		Message: `"field ` + fieldMaxBufferedBytes + `: %v bytes is out of range: ` + sizeAccepted + `".format(this)`,
	},
	lintrule.Check{
		When:    `this.type() == "string" && !this.trim().re_match("(?i)^[0-9]+(\\.[0-9]+)?([e][+]?[0-9]+)?\\s*(KiB|MiB|GiB|TiB|KB|MB|GB|TB|B)?$")`,
		Message: `"field ` + fieldMaxBufferedBytes + `: %q is not a size: ` + sizeAccepted + `".format(this)`,
	},
)

// maxBufferedBytesFromParsed reads max_buffered_bytes: a size string or a
// number of bytes.
func maxBufferedBytesFromParsed(conf *service.ParsedConfig) (int64, error) {
	v, err := conf.FieldAny(fieldMaxBufferedBytes)
	if err != nil {
		return 0, err
	}
	n, err := parseByteSize(v)
	if err != nil {
		return 0, fmt.Errorf("field %s: %w", fieldMaxBufferedBytes, err)
	}
	return n, nil
}

// sizeAccepted is what a size may be, for errors.
const sizeAccepted = "use a number of bytes or a size such as 256MiB, 1GiB, 512KiB, 64MB"

// byteUnits are the units a size may end with.
var byteUnits = []struct {
	suffix string
	bytes  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// parseByteSize reads a number of bytes from YAML: an integer, or a
// string such as "256MiB", "1.5GiB", "64 MB" or "1048576".
func parseByteSize(v any) (int64, error) {
	const accepted = sizeAccepted
	switch n := v.(type) {
	case int:
		return checkSize(float64(n), accepted)
	case int64:
		return checkSize(float64(n), accepted)
	case float64:
		return checkSize(n, accepted)
	case string:
		s := strings.TrimSpace(n)
		mult := int64(1)
		for _, u := range byteUnits {
			if len(s) > len(u.suffix) && strings.EqualFold(s[len(s)-len(u.suffix):], u.suffix) {
				s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.bytes
				break
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a size: %s", n, accepted)
		}
		return checkSize(f*float64(mult), accepted)
	}
	return 0, fmt.Errorf("%v (%T) is not a size: %s", v, v, accepted)
}

func checkSize(f float64, accepted string) (int64, error) {
	if f < 0 || math.IsNaN(f) || f > math.MaxInt64/2 {
		return 0, fmt.Errorf("%v bytes is out of range: %s", f, accepted)
	}
	return int64(f), nil
}
