package output

import (
	"fmt"
	"regexp"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/producer"
)

// metaKeyRef matches a partition_key that is one metadata value:
// `${! meta("key") }`.
var metaKeyRef = regexp.MustCompile(`^\$\{!\s*meta\("([^"\\]+)"\)\s*\}$`)

// keyOf gives each message's partition key. When the key is one metadata
// value it reads it directly: Bloblang's interpolation costs three
// allocations per message for the same string. A value that is empty or
// missing goes through Bloblang, so the result is always what the
// interpolation gives (meta() makes those null, written "null").
type keyOf struct {
	meta string
	exec *service.MessageBatchInterpolationExecutor
}

func (k keyOf) TryString(i int, msg *service.Message) (string, error) {
	if k.meta != "" {
		if v, _ := msg.MetaGet(k.meta); v != "" {
			return v, nil
		}
	}
	return k.exec.TryString(i)
}

func entry(keys keyOf, hashKeys *service.MessageBatchInterpolationExecutor, i int, msg *service.Message) (producer.Entry, error) {
	var (
		e   producer.Entry
		err error
	)
	if e.PartitionKey, err = keys.TryString(i, msg); err != nil {
		return e, &fieldError{field: fieldPartitionKey, err: err}
	}
	if hashKeys != nil {
		if e.ExplicitHashKey, err = hashKeys.TryString(i); err != nil {
			return e, &fieldError{field: fieldHashKey, err: err}
		}
	}
	if e.Data, err = msg.AsBytes(); err != nil {
		return e, fmt.Errorf("reading message body: %w", err)
	}
	return e, nil
}
