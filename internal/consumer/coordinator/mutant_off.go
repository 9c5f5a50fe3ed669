//go:build !mutant

package coordinator

import "github.com/connect-kinesis/connect-kinesis/internal/consumer"

// gatedParents are the parents the gate waits for: all of them. A build
// with the `mutant` tag can switch the guard off (mutant.go) so that the
// simulation shows it catches it; a release is never built with that tag.
func gatedParents(s consumer.Shard) []string { return s.Parents() }
