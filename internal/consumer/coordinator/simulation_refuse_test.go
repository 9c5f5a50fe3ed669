package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// A pause at admission: the process stops between the pipeline's receive
// of a batch and Admit's check of its lease, as a SIGSTOP landing there
// would. Every other gate of the simulation holds a call before it
// reaches the fakes, and a reader's send and Admit run within one virtual
// instant, so without this fault Admit never refuses a batch: the reader
// checks the lease's local deadline before each send, and its deadline
// timer runs on during a pause. Once the instance wakes, past its lease,
// Admit refuses the batch the reader already counted as delivered (a first
// delivery refused), the batch goes back to the reader's redelivery queue,
// and the reader usually ends on its lost lease: the path whose budget
// give-back the drain checks (the budget's checkBudgets and Drained) see.

// armAdmitPause arms a pause of d for the next batch in's pipeline
// receives, and wakes a pipeline waiting in Consumer.Next to take it.
func (s *csim) armAdmitPause(in *csimInst, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in.admitPause.Store(int64(d))
	if in.interrupt != nil {
		in.interrupt()
	}
	s.log = append(s.log, time.Now().UTC().Format("15:04:05.000 ")+"pause of "+in.id+" armed at admission for "+d.String())
}

// pauseInst holds every call of in for d, unless in is not running.
func (s *csim) pauseInst(in *csimInst, d time.Duration) {
	s.mu.Lock()
	if in.state != "running" {
		s.mu.Unlock()
		return
	}
	in.wake = make(chan struct{})
	in.state = "paused"
	s.mu.Unlock()
	time.AfterFunc(d, func() { s.wakeInst(in) })
}

// next is the pipeline's Consumer.Next. With a pause armed it takes the
// next batch from the consumer's channel, pauses the instance, and once
// awake admits the batch as Next does (Batch.Admit), counting a refusal;
// with an aligned wake armed it is busy until then (nextAligned).
func (i *csimInst) next(ctx context.Context) (*consumer.Batch, error) {
	for {
		if at := i.busyUntil.Swap(0); at != 0 {
			b, ok, err := i.nextAligned(ctx, time.Unix(0, at))
			if err != nil {
				return nil, err
			}
			if ok {
				return b, nil
			}
			continue
		}
		nctx, cancel := context.WithCancel(ctx)
		i.sim.mu.Lock()
		i.interrupt = cancel
		armed := i.admitPause.Load() != 0 || i.busyUntil.Load() != 0
		i.sim.mu.Unlock()
		if !armed {
			b, err := i.c.Next(nctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				return b, err
			}
			continue // a pause was armed meanwhile
		}
		cancel()
		if i.busyUntil.Load() != 0 {
			continue
		}
		var b *consumer.Batch
		select {
		case b = <-i.c.Batches():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d := time.Duration(i.admitPause.Swap(0)); d > 0 {
			i.sim.logf("pause of %s for %v lands at the admission of %d records of %s", i.id, d, len(b.Records), b.Shard)
			i.sim.pauseInst(i, d)
			if err := i.gate(ctx); err != nil {
				return nil, err
			}
		}
		// A refused batch is its reader's again at once: what is logged
		// of it is read before Admit.
		first, n, shard := b.Attempts == nil, len(b.Records), b.Shard
		if b.Admit() {
			return b, nil
		}
		i.sim.stats.refused.Add(1)
		if first {
			i.sim.stats.refusedFirst.Add(1)
		}
		i.sim.logf("%s's Admit refused %d records of %s (first delivery: %v)", i.id, n, shard, first)
	}
}

// csimRefusalsFrom is the count of schedules from which a run must have
// seen Admit refuse a first delivery: the CI slice's 1,000 see about ten.
const csimRefusalsFrom = 1000

// checkRefusalsLive fails a passing run of at least csimRefusalsFrom
// schedules in which Admit refused no first delivery: the pause at
// admission no longer reaches that path, and the budget's checks of it
// check nothing.
func checkRefusalsLive(t *testing.T, stats *csimStats) {
	t.Helper()
	if n := stats.schedules.Load(); n >= csimRefusalsFrom && stats.refusedFirst.Load() == 0 && !t.Failed() {
		t.Errorf("consumer simulation: Admit refused no first delivery in %d schedules (%d refusals in all): the pause at admission never reached that path", n, stats.refused.Load())
	}
}
