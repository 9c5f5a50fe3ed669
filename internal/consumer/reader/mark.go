package reader

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// askMark starts storing the redelivery mark past an answer's records as
// soon as the answer is in (docs/poison-records.md), so that the write runs
// while the reader converts the answer and charges its budget, not after:
// cover then waits for it before anything goes to the pipeline. The mark
// asked is the answer's last record, whole: at or past the last user
// record the reader delivers of it (a whole record is past its
// sub-records). A mark past what is delivered (a last record dropped as
// another hash range's) only marks a record no owner delivers, which the
// promise allows. Nil when nothing is marked.
func (r *Reader) askMark(raw []types.Record) *markAsk {
	if r.st.Marker == nil || len(raw) == 0 {
		return nil
	}
	p := consumer.Position{Sequence: aws.ToString(raw[len(raw)-1].SequenceNumber)}
	l := *r.lease.Load()
	return &markAsk{pos: p, token: l.Token, answer: r.st.Marker.Ask(l, p)}
}

// markAsk is a write of the redelivery mark under way.
type markAsk struct {
	pos    consumer.Position
	token  int64
	answer <-chan error
}

// cover waits until the redelivery mark past recs is stored, before they
// go to the pipeline (docs/poison-records.md): once the store holds it, any
// later owner of the shard that reads them again, after a crash, a lost
// lease or a hand-off, delivers them marked. The marker writes every
// instance's asks of the stream together, so the wait is at most an
// interval plus the call. asked is the write askMark started for them, if
// any. False when ctx ends first. The mark the write found stored raises
// the reader's (Marker.Found) before anything goes over.
//
// A fenced write does not end the reader by itself: the lease may be
// named by another owner only for a moment, as when a store came back
// empty and another instance took the shard before this one's re-seed
// won it back (a token tie goes to the holder). The reader delivers
// nothing and waits for its coordinator: the next renewal either confirms
// the lease (ask again, under the lease it confirmed) or finds it lost
// and ends the reader.
func (r *Reader) cover(ctx context.Context, recs []consumer.Record, asked *markAsk) bool {
	if r.st.Marker == nil || len(recs) == 0 {
		return true
	}
	pos := recs[len(recs)-1].Position()
	if asked != nil && (pos.Compare(asked.pos) > 0 || asked.token != r.lease.Load().Token) {
		asked = nil // not past these records, or under a lease replaced since: ask again
	}
	logged := false
	for {
		renewal := r.nextRenewal()
		var answer <-chan error
		l := *r.lease.Load()
		if asked != nil {
			answer, l.Token, asked = asked.answer, asked.token, nil
		} else {
			answer = r.st.Marker.Ask(l, pos)
		}
		var err error
		select {
		case err = <-answer:
		case <-ctx.Done():
			return false
		}
		switch {
		case err == nil:
			// The store's mark as the write found it: above the take's, an
			// owner the store handed the shard to meanwhile delivered up to
			// there, and a re-seed won the shard back without this reader
			// hearing of it. What is read again up to there goes marked.
			r.RaiseDelivered(r.st.Marker.Found(l))
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
