package producer

// A request of an ordered write holds each partition key once, so a key
// repeated in a write costs it a round trip per repetition, and a key an
// earlier write still holds waits for that write: the records that did not
// go in their write's first round are counted (MetricKeyWaited), and a
// write bound by its own repeated keys is reported (Config.KeyBound), for
// the output to name the settings that lift that ceiling.

// noteKeyWaits counts, after a write's first round, the user records that
// round left to wait for an earlier round of their key: a key in an earlier
// write still in flight, or a key repeated within the write (a request
// holds each key once). When more than half of the write's records wait
// for an earlier record of their key in the same write, the write is bound
// by its repeated keys, not by the stream, and KeyBound is told.
func (p *Producer) noteKeyWaits(recs *records, w *orderedWrite) {
	waited := 0
	for _, q := range w.lanes {
		waited += recs.keysIn(q)
	}
	if waited == 0 {
		return
	}
	p.mKeyWaited.Incr(int64(waited), p.streamLabel())
	if repeated := waited - w.heldRecords; p.conf.KeyBound != nil && 2*repeated > w.total {
		p.conf.KeyBound(w.total, repeated)
	}
}
