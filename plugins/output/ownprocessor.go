package output

import (
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// ownProcessors is a batch processor the output appends to its own
// batching policy (kinesis_batch_order: the pacing and the numbering, one
// processor, as Benthos' per-message span around each processor's call
// costs more than what either does). Benthos builds a policy's
// processors from config, so each output registers its instance under an
// id, writes that id into the processor's config, and the constructor finds
// the instance by it. A config naming the processor itself finds none and
// is refused.
type ownProcessors struct {
	name      string
	idPrefix  string
	instances sync.Map
	ids       atomic.Uint64
}

// registerOwnProcessor registers the processor name with Benthos' global
// environment; it panics only on a registration error, at init.
func registerOwnProcessor(name, idPrefix, summary string) *ownProcessors {
	o := &ownProcessors{name: name, idPrefix: idPrefix}
	spec := service.NewConfigSpec().Summary(summary).Field(service.NewStringField("id"))
	err := service.RegisterBatchProcessor(name, spec, func(conf *service.ParsedConfig, _ *service.Resources) (service.BatchProcessor, error) {
		id, err := conf.FieldString("id")
		if err != nil {
			return nil, err
		}
		p, ok := o.instances.Load(id)
		if !ok {
			return nil, fmt.Errorf("%s is added by the kinesis output to its own batching; it cannot be used in a config", name)
		}
		return p.(service.BatchProcessor), nil
	})
	if err != nil {
		panic(err)
	}
	return o
}

// newID returns an id no other instance of this processor has.
func (o *ownProcessors) newID() string { return o.idPrefix + strconv.FormatUint(o.ids.Add(1), 10) }

func (o *ownProcessors) add(id string, p service.BatchProcessor) { o.instances.Store(id, p) }

func (o *ownProcessors) remove(id string) { o.instances.Delete(id) }

// appendTo returns the batching field raw with the instance id appended to
// its processors.
func (o *ownProcessors) appendTo(raw any, id string) (map[string]any, error) {
	fields, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("field %s: expected an object, got %T", fieldBatching, raw)
	}
	out := maps.Clone(fields)
	procs, _ := fields["processors"].([]any)
	out["processors"] = append(append([]any(nil), procs...), map[string]any{o.name: map[string]any{"id": id}})
	return out, nil
}
