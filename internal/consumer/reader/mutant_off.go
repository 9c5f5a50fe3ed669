//go:build !mutant

package reader

// foldable says whether the n-th pending batch may be folded into the
// acked run: only when it is acked, so that the checkpoint never passes a
// batch still in the pipeline. A build with the `mutant` tag can switch the
// guard off (mutant.go) so that the simulation shows it catches it; a
// release is never built with that tag.
func foldable(q []trackedBatch, n int) bool { return q[n].acked }

// refusedReturned says whether a batch Admit refused goes back to its
// reader's own charge (budget.Shard.Returned), out of the pipeline's: it
// does, so that the reader's close gives it back when the reader ends with
// the batch waiting for redelivery.
func refusedReturned() bool { return true }
