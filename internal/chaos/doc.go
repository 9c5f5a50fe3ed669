// Package chaos runs the reliability suite of issue 6: a producer process
// writes keyed, counted records through the `kinesis` output and a fault
// proxy; three consumer processes read them through the proxy with Redis
// checkpoints; a schedule kills instances, reshards the stream and disturbs
// Redis during the load; a checker then compares what was sent, what the
// stream holds and what was delivered (see Check and Table).
//
// Every process is the real connect-kinesis binary with a YAML config, so the
// suite tests what users run. The emulator is kinesis-mock (it reshards and
// lists child shards); the proxy is faultproxy.Front.
package chaos
