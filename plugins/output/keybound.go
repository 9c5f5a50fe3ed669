package output

import "github.com/connect-kinesis/connect-kinesis/internal/producer"

// logKeyBound tells the user, once per output, that an ordered write was
// bound by its repeated partition keys, and what lifts that ceiling. With
// order kept a request holds each key once, so a key in every batch lands
// one record (or one aggregated record) per round trip: at 30 ms, about 33
// records/s per hot key, far below a shard's 1,000. The producer calls it
// after every such write; only the first logs.
func (o *kinesisOutput) logKeyBound(records, repeated int) {
	o.keyBound.Do(func() {
		remedy := "set " + fieldAggregation + "." + fieldAggEnabled + ": true if the stream's readers de-aggregate KPL records (the KCL, Flink, the kinesis input), so a key's records share one aggregated record per round trip, or " + fieldPreserveOrder + ": false if their order does not matter"
		if o.conf.Aggregation.Enabled {
			remedy = "set " + fieldPreserveOrder + ": false if their order does not matter"
		}
		o.log.With("stream", o.conf.Stream, "records", records, "waited", repeated).
			Infof("Writes are bound by repeated partition keys: %d of a batch's %d records had to wait for an earlier round trip of their key, as an ordered output sends a key at most once per request and lands one record of it per round trip. To write faster, %s. The %s metric counts the records that waited. Logged once.",
				repeated, records, remedy, producer.MetricKeyWaited)
	})
}
