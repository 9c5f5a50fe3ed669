// Package budget is the byte budget of the `kinesis` input
// (max_buffered_bytes): one Budget for the input, a Shard per reader that
// reserves room right before each call that returns records (the record
// source's Room), and a Charge per batch, given back once, when the
// pipeline acks it. Cost is the one measure of a record wherever it is
// counted. The package knows nothing of readers or sources.
package budget
