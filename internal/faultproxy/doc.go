// Package faultproxy is an HTTP proxy to put between the AWS SDK and a Kinesis
// emulator in tests. Neither emulator throttles or fails, so the faults a
// real stream produces (throttled requests, 5xx, PutRecords entries refused,
// dropped connections, latency) come from here, switched on and off at run
// time by the test, per API operation, with a seeded random source.
//
// It speaks the Kinesis JSON protocol over HTTP/1.1: the operation is the
// suffix of the `X-Amz-Target` header (`Kinesis_20131202.PutRecords`), the
// body JSON. Refused PutRecords entries are refused for real: only the other
// entries reach the emulator, and synthetic error results are spliced back in
// at the refused entries' indices, so a record the proxy refused was never
// written.
//
// To grow it (read faults, per-shard limits), add fields to Rule and handle
// them in ServeHTTP, or set Rule.Hook for a one-off behaviour.
package faultproxy
