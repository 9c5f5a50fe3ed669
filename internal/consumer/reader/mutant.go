//go:build mutant

package reader

import "os"

// foldable, in a mutant build with
// CONNECT_KINESIS_MUTANT=tracker-contiguity, folds a batch still in the
// pipeline into the acked run when any later batch is acked: the
// checkpoint passes a gap (`make simulate-mutants`).
func foldable(q []trackedBatch, n int) bool {
	if os.Getenv("CONNECT_KINESIS_MUTANT") != "tracker-contiguity" {
		return q[n].acked
	}
	for _, b := range q[n:] {
		if b.acked {
			return true
		}
	}
	return false
}

// refusedReturned, in a mutant build with
// CONNECT_KINESIS_MUTANT=budget-refused, leaves a batch Admit refused
// counted in the pipeline: a reader that ends with it waiting for
// redelivery never gives its room back (`make simulate-mutants`).
func refusedReturned() bool {
	return os.Getenv("CONNECT_KINESIS_MUTANT") != "budget-refused"
}
