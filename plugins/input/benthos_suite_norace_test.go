//go:build !race

package input

import "github.com/redpanda-data/benthos/v4/public/service/integration"

// raceFreeDefinitions are the definitions that run only without the race
// detector: see benthos_suite_race_test.go for why.
func raceFreeDefinitions() []integration.StreamTestDefinition {
	return []integration.StreamTestDefinition{integration.StreamTestAtLeastOnceDelivery()}
}
