//go:build race

package input

import "github.com/redpanda-data/benthos/v4/public/service/integration"

// raceFreeDefinitions leaves out, under the race detector, the suite's
// definitions that race on their own state. StreamTestAtLeastOnceDelivery
// (Benthos v4.60.0) ranges over its map of expected messages in the
// sending goroutine while the receiving loop deletes from it, so -race
// reports the suite itself whenever a message arrives before the sender
// has finished its loop. `make test` runs this suite a second time without
// -race (the `suite-norace` target), where the definition runs.
func raceFreeDefinitions() []integration.StreamTestDefinition { return nil }
