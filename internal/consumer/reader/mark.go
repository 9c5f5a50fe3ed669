package reader

import (
	"context"
	"errors"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// cover stores the redelivery mark past recs before they go to the
// pipeline (docs/poison-records.md): once the store holds it, any later
// owner of the shard that reads them again, after a crash, a lost lease or
// a hand-off, delivers them marked. The marker writes every instance's
// asks of the stream together, once an interval, so the wait is at most
// an interval plus the call. False when ctx ends first.
//
// A fenced write does not end the reader by itself: the lease may be
// named by another owner only for a moment, as when a store came back
// empty and another instance took the shard before this one's re-seed
// won it back (a token tie goes to the holder). The reader delivers
// nothing and waits for its coordinator: the next renewal either confirms
// the lease (ask again, under the lease it confirmed) or finds it lost
// and ends the reader.
func (r *Reader) cover(ctx context.Context, recs []consumer.Record) bool {
	if r.st.Marker == nil || len(recs) == 0 {
		return true
	}
	pos := recs[len(recs)-1].Position()
	logged := false
	for {
		renewal := r.nextRenewal()
		err := r.st.Marker.Cover(ctx, *r.lease.Load(), pos)
		switch {
		case err == nil:
			if logged {
				r.log.Info("The lease is confirmed again; storing how far the shard was delivered works, reading on")
			}
			return true
		case !errors.Is(err, consumer.ErrLeaseLost):
			return false
		}
		if !logged {
			r.log.Warnf("Not delivering until a renewal confirms the lease or finds it lost: %v", err)
			logged = true
		}
		select {
		case <-renewal:
		case <-ctx.Done():
			return false
		}
	}
}
