package kinesisx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrStalled is wrapped by the error of a call a StallGuard gave up: nothing
// of its answer arrived for the guard's bound. It is a timeout of the
// connection (Transient), not the caller giving up.
var ErrStalled error = stallError{}

type stallError struct{}

func (stallError) Error() string   { return "no answer arriving" }
func (stallError) Timeout() bool   { return true }
func (stallError) Temporary() bool { return true }

// StallGuard gives up one call when nothing of its answer arrives for a
// bound: neither its headers, nor, once they came, another byte of its
// body. A call's total bound must allow a large answer on a slow link; a
// stall bound can be much shorter, because an answer that is coming keeps
// arriving. So a half-open connection, or an answer cut off mid-body
// without the connection closing, is noticed within the stall bound:
//
//	g := kinesisx.NewStallGuard(ctx, 5*time.Second)
//	out, err := client.GetRecords(g.Context(), in, g.Option)
//	err = g.Done(err)
type StallGuard struct {
	bound  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// NewStallGuard starts guarding a call made with Context and Option; its
// clock starts now.
func NewStallGuard(ctx context.Context, bound time.Duration) *StallGuard {
	g := &StallGuard{bound: bound}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	g.timer = time.AfterFunc(bound, func() { g.cancel(ErrStalled) })
	return g
}

// Context is the context of the guarded call.
func (g *StallGuard) Context() context.Context { return g.ctx }

// Option is the per-call option that lets the guard see the answer arrive.
func (g *StallGuard) Option(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		// Last in the step, so next to the transport: it sees the answer
		// before the SDK (or the records codec) reads its body.
		return s.Deserialize.Add(stallWatch{g}, middleware.After)
	})
}

// Done ends the guard and returns the call's error, as ErrStalled when the
// guard gave the call up.
func (g *StallGuard) Done(err error) error {
	g.timer.Stop()
	stalled := errors.Is(context.Cause(g.ctx), ErrStalled)
	g.cancel(nil)
	if err != nil && stalled {
		// Only the stall is wrapped: the call's own error is a cancelled
		// context, which would read as the caller giving up.
		return fmt.Errorf("%w for %v: %v", ErrStalled, g.bound, err)
	}
	return err
}

// arrived restarts the guard's clock.
func (g *StallGuard) arrived() { g.timer.Reset(g.bound) }

type stallWatch struct{ g *StallGuard }

func (stallWatch) ID() string { return "KinesisxStallWatch" }

func (w stallWatch) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Response != nil && resp.Body != nil {
		w.g.arrived()
		resp.Body = arrivingBody{ReadCloser: resp.Body, g: w.g}
	}
	return out, md, err
}

// arrivingBody restarts its guard's clock whenever bytes arrive.
type arrivingBody struct {
	io.ReadCloser
	g *StallGuard
}

func (b arrivingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.g.arrived()
	}
	return n, err
}
