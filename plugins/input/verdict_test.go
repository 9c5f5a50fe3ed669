package input

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// poisonSink is a batch output that fails, by name, each message whose body
// holds "poison", as this project's kinesis output names refused records.
type poisonSink struct{}

func (poisonSink) Connect(context.Context) error { return nil }
func (poisonSink) WriteBatch(_ context.Context, b service.MessageBatch) error {
	var bErr *service.BatchError
	for i, m := range b {
		body, _ := m.AsBytes()
		if strings.Contains(string(body), "poison") {
			if bErr == nil {
				bErr = service.NewBatchError(b, errors.New("the sink refused a record"))
			}
			bErr.Failed(i, errors.New("refused: "+string(body)))
		}
	}
	if bErr != nil {
		return bErr
	}
	return nil
}
func (poisonSink) Close(context.Context) error { return nil }

// oneBatch is an input that hands over one indexed batch and reports the
// verdicts its ack read.
type oneBatch struct {
	bodies   []string
	sent     bool
	verdicts chan []error
	named    chan bool
}

func (i *oneBatch) Connect(context.Context) error { return nil }
func (i *oneBatch) ReadBatch(context.Context) (service.MessageBatch, service.AckFunc, error) {
	if i.sent {
		return nil, nil, service.ErrEndOfInput
	}
	i.sent = true
	b := make(service.MessageBatch, len(i.bodies))
	for j, s := range i.bodies {
		b[j] = service.NewMessage([]byte(s))
	}
	idx := b.Index()
	return b, func(_ context.Context, err error) error {
		v, named := messageVerdicts(idx, len(b), err)
		i.verdicts <- v
		i.named <- named
		return nil
	}, nil
}
func (i *oneBatch) Close(context.Context) error { return nil }

// What the input's ack learns, through a real Benthos stream, of which
// messages failed: what docs/poison-records.md says was read in the
// Benthos sources.
func TestMessageVerdictsThroughAStream(t *testing.T) {
	for name, tc := range map[string]struct {
		pipeline, output string
		named            bool
		failed           []bool
	}{
		"the output names the failed message": {
			output: "poison_sink: {}", named: true, failed: []bool{false, false, true, false},
		},
		"reject_errored names the errored message too": {
			pipeline: `processors: [ { mapping: 'root = if content() == "b" { throw("bad b") } else { content() }' } ]`,
			output:   "reject_errored: { poison_sink: {} }", named: true, failed: []bool{false, true, true, false},
		},
		"an output batching policy loses which one": {
			output: "poison_sink: { batching: { count: 4 } }", named: false, failed: []bool{true, true, true, true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := &oneBatch{bodies: []string{"a", "b", "poison", "c"}, verdicts: make(chan []error, 1), named: make(chan bool, 1)}
			env := service.NewEnvironment()
			require.NoError(t, env.RegisterBatchInput("one_batch", service.NewConfigSpec(),
				func(*service.ParsedConfig, *service.Resources) (service.BatchInput, error) { return in, nil }))
			require.NoError(t, env.RegisterBatchOutput("poison_sink", service.NewConfigSpec().Field(service.NewBatchPolicyField("batching")),
				func(c *service.ParsedConfig, _ *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
					p, err := c.FieldBatchPolicy("batching")
					return poisonSink{}, p, 1, err
				}))
			b := env.NewStreamBuilder()
			yaml := "input:\n  one_batch: {}\noutput:\n  " + tc.output + "\n"
			if tc.pipeline != "" {
				yaml += "pipeline:\n  " + tc.pipeline + "\n"
			}
			require.NoError(t, b.SetYAML(yaml))
			s, err := b.Build()
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			go func() { _ = s.Run(ctx) }()
			defer func() { _ = s.StopWithin(5 * time.Second) }()

			var v []error
			select {
			case v = <-in.verdicts:
			case <-ctx.Done():
				t.Fatal("the batch was never acknowledged")
			}
			assert.Equal(t, tc.named, <-in.named)
			failed := make([]bool, len(v))
			for i, e := range v {
				failed[i] = e != nil
			}
			assert.Equal(t, tc.failed, failed)
		})
	}
}
