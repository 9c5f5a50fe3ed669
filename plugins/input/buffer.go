package input

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// maxDefaultBudget is the default budget's ceiling, and the default where
// the process has no memory limit (there the heap may grow to about twice
// the budget's records plus 60 MiB before the collector frees it).
const maxDefaultBudget = 256 << 20

// defaultBudgetShare is the part of the process's memory limit the default
// budget takes: the Go heap holds the budget's records, Benthos' messages
// made of them, the process itself and what the collector has not yet
// freed, all within the limit.
const defaultBudgetShare = 4

// memoryLimit is the process's memory limit and where it is from: the Go
// memory limit (GOMEMLIMIT, or what the program set, such as the
// connect-kinesis binary from the container's limit) when there is one,
// else the container's memory limit (cgroup v2 or v1); 0 when there is
// none. A variable so that tests choose the limit.
var memoryLimit = func() (int64, string) {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		if os.Getenv("GOMEMLIMIT") != "" {
			return l, "GOMEMLIMIT"
		}
		return l, "the Go memory limit"
	}
	if l, err := memlimit.FromCgroup(); err == nil && l > 0 && l < math.MaxInt64 {
		return int64(l), "the container's memory limit"
	}
	return 0, ""
}

// defaultMaxBufferedBytes is the budget when max_buffered_bytes is unset,
// with the sentence that says why: a quarter of the memory limit, at most
// 256 MiB.
func defaultMaxBufferedBytes() (int64, string) {
	limit, source := memoryLimit()
	if limit <= 0 {
		return maxDefaultBudget, "max_buffered_bytes is unset and the process has no memory limit (no GOMEMLIMIT, no container limit): the input's byte budget is 256.0MiB"
	}
	n := min(limit/defaultBudgetShare, maxDefaultBudget)
	return n, fmt.Sprintf("max_buffered_bytes is unset: the input's byte budget is %s, a quarter of %s (%s), at most 256.0MiB; set max_buffered_bytes to choose another",
		mibText(n), source, mibText(limit))
}

func mibText(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

func maxBufferedBytesField() *service.ConfigField {
	return service.NewAnyField(fieldMaxBufferedBytes).
		Description("Unset (the default): a quarter of the memory limit, at most 256 MiB. The most bytes of records the input holds until acknowledged; `0` removes the bound. The process needs about twice this plus 60 MiB. See [tuning](../../tuning.md#sizing-memory-max_buffered_bytes).").
		LintRule(lintByteSize).
		Optional().Advanced()
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
// number of bytes; unset, the default that follows the memory limit, with
// the sentence to log about it.
func maxBufferedBytesFromParsed(conf *service.ParsedConfig) (n int64, note string, err error) {
	var v any
	if conf.Contains(fieldMaxBufferedBytes) {
		if v, err = conf.FieldAny(fieldMaxBufferedBytes); err != nil {
			return 0, "", err
		}
	}
	if v == nil {
		// Unset, or null as a full config example writes it.
		n, note = defaultMaxBufferedBytes()
		return n, note, nil
	}
	if n, err = parseByteSize(v); err != nil {
		return 0, "", fmt.Errorf("field %s: %w", fieldMaxBufferedBytes, err)
	}
	return n, "", nil
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
