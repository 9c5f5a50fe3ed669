//go:build e2ehook

package reader

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The e2ehook build (`go build -tags e2ehook`; `make build-e2ehook` writes
// bin/connect-kinesis-e2ehook, and `make unit` names it to the tests in
// CONNECT_KINESIS_E2EHOOK_BIN) lets an end-to-end test hold one
// hand-over between the reader's lease check and its send: the refusal at
// admission that a paused process meets only by luck, made deterministic.
// The test makes the lease's local deadline pass during the hold (it holds
// the instance's Redis traffic), and the pipeline's Next then takes the
// batch past it. A release is never built with this tag; the default build
// has holdBeforeSend of e2ehook_off.go, which does nothing and reads no
// variable (cmd/connect-kinesis's TestDefaultBinaryHasNoE2EHook checks
// that the binary does not even contain their names).
const (
	// E2EHoldBeforeSendEnv is how long the held hand-over waits (a Go
	// duration); unset or invalid, nothing is held.
	E2EHoldBeforeSendEnv = "CONNECT_KINESIS_E2E_HOLD_BEFORE_SEND"
	// E2EHoldSendEnv is which hand-over of the process is held, counting
	// from 1 every pass through handOver of every shard: first deliveries,
	// redeliveries, and a send tried again after the lease's deadline
	// passed; unset, the first.
	E2EHoldSendEnv = "CONNECT_KINESIS_E2E_HOLD_SEND"
)

var (
	e2eHoldOnce sync.Once
	e2eHold     time.Duration
	e2eHoldNth  int64 = 1
	e2eSends    atomic.Int64
)

// holdBeforeSend, on the hand-over E2EHoldSendEnv names, waits
// E2EHoldBeforeSendEnv (or until ctx ends) and returns no deadline
// channel, so that the send that follows is not taken back at the lease's
// deadline: the batch reaches Admit however late the pipeline asks for it.
// That is the window a real process reaches only when the pipeline's Next
// takes the batch between the deadline and the deadline timer's run. Every
// other hand-over gets expired back unchanged.
func (r *Reader) holdBeforeSend(ctx context.Context, expired <-chan time.Time) <-chan time.Time {
	e2eHoldOnce.Do(func() {
		e2eHold, _ = time.ParseDuration(os.Getenv(E2EHoldBeforeSendEnv))
		if n, err := strconv.ParseInt(os.Getenv(E2EHoldSendEnv), 10, 64); err == nil && n > 0 {
			e2eHoldNth = n
		}
	})
	if e2eHold <= 0 || e2eSends.Add(1) != e2eHoldNth {
		return expired
	}
	r.log.Infof("e2e hook: holding hand-over %d (shard %s of stream %s) for %v before its send", e2eHoldNth, r.shard.ID, r.st.Name, e2eHold)
	t := time.NewTimer(e2eHold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return expired
	}
	r.log.Infof("e2e hook: hand-over %d (shard %s of stream %s) held; sending it now", e2eHoldNth, r.shard.ID, r.st.Name)
	return nil
}
