// Package output registers the `kinesis` batch output: it packs each batch
// into PutRecords requests within Kinesis limits, retries only the records
// that failed, names exactly the messages that failed for good, and can
// aggregate small records in the KPL format.
//
// Import it for its side effect to add the output to a Benthos binary:
//
//	import _ "github.com/connect-kinesis/connect-kinesis/plugins/output"
package output
