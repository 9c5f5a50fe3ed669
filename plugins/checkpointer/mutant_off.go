//go:build !mutant

package checkpointer

// mutate returns a script's source unchanged. A build with the `mutant`
// tag replaces it (mutant.go) so that the simulation can show it catches a
// guard switched off; a release is never built with that tag.
func mutate(_, src string) string { return src }
