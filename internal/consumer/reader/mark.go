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
// an interval plus the call. A fenced lease ends the reader (nothing more
// may be delivered under it); false also when ctx ends.
func (r *Reader) cover(ctx context.Context, recs []consumer.Record) bool {
	if r.st.Marker == nil || len(recs) == 0 {
		return true
	}
	err := r.st.Marker.Cover(ctx, *r.lease.Load(), recs[len(recs)-1].Position())
	switch {
	case err == nil:
		return true
	case errors.Is(err, consumer.ErrLeaseLost):
		if !r.lost.Load() {
			r.log.Warnf("Stopped reading: %v", err)
			r.MarkLost()
		}
	}
	return false
}
