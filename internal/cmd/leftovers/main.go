// Command leftovers fails when a process that internal/testenv started
// during a test run is still running. testenv records every child it starts
// in the folder named by CONNECT_KINESIS_PIDS_DIR; `make test` sets that
// folder for the run and calls this command after it:
//
//	go run ./internal/cmd/leftovers bin/test-pids
//
// It checks the recorded PIDs (and the process groups they lead), not
// process names: a system redis-server may legitimately run on the machine.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func main() {
	grace := flag.Duration("grace", 5*time.Second,
		"how long children may take to die after the test binary that started them exited")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: leftovers [-grace 5s] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	deadline := time.Now().Add(*grace)
	for {
		left, recorded, err := testenv.Leftovers(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "leftovers:", err)
			os.Exit(2)
		}
		if len(left) == 0 {
			fmt.Printf("leftovers: none of the %d processes the tests started is running\n", recorded)
			return
		}
		if time.Now().After(deadline) {
			fmt.Printf("leftovers: %d of the processes the tests started still run:\n", len(left))
			for _, l := range left {
				fmt.Printf("  %s\n", l)
			}
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
