// Package consumertest holds the fakes the consumer's tests use: Kinesis
// (GetRecords polling), Store (fencing and lease expiry by the local
// clock), enhanced fan-out backlogs, scripted subscriptions and stream
// consumers, a metrics exporter that keeps values, and a test Config.
package consumertest
