// Command kinesissim runs the Kinesis simulator (internal/kinesissim) for
// scale runs by hand:
//
//	go run ./internal/cmd/kinesissim -stream orders=10000 -pattern-streams 'events-:50:40'
//
// Its first line on stdout is "kinesissim listening on http://127.0.0.1:PORT":
// point connect-kinesis' `endpoint` at that URL (any region, any static
// credentials). -pattern-streams prefix:count:shards creates count streams
// named prefix0 .. prefix<count-1>, for inputs that follow a stream pattern.
// On SIGINT or SIGTERM it prints the calls it served per operation and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesissim"
)

// streamFlags collects repeated -stream name=shards flags.
type streamFlags []streamSpec

type streamSpec struct {
	name   string
	shards int
}

func (f *streamFlags) String() string { return fmt.Sprint(*f) }

func (f *streamFlags) Set(v string) error {
	name, n, ok := strings.Cut(v, "=")
	shards, err := strconv.Atoi(n)
	if !ok || name == "" || err != nil || shards < 1 {
		return fmt.Errorf("%q is not name=shards (a stream name and a shard count of at least 1)", v)
	}
	*f = append(*f, streamSpec{name, shards})
	return nil
}

// patternFlags collects repeated -pattern-streams prefix:count:shards flags.
type patternFlags []streamFlags

func (f *patternFlags) String() string { return fmt.Sprint(*f) }

func (f *patternFlags) Set(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return fmt.Errorf("%q is not prefix:count:shards", v)
	}
	count, err1 := strconv.Atoi(parts[1])
	shards, err2 := strconv.Atoi(parts[2])
	if parts[0] == "" || err1 != nil || err2 != nil || count < 1 || shards < 1 {
		return fmt.Errorf("%q is not prefix:count:shards (a name prefix, a stream count and a shard count, both at least 1)", v)
	}
	var specs streamFlags
	for i := range count {
		specs = append(specs, streamSpec{parts[0] + strconv.Itoa(i), shards})
	}
	*f = append(*f, specs)
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kinesissim:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then prints the calls served to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		opts     kinesissim.Options
		streams  streamFlags
		patterns patternFlags
	)
	fs := flag.NewFlagSet("kinesissim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Addr, "addr", "127.0.0.1:0", "address to listen on (port 0: a free one)")
	fs.StringVar(&opts.Region, "region", "us-east-1", "region named in stream ARNs")
	fs.StringVar(&opts.AccountID, "account", "000000000000", "account ID named in stream ARNs")
	fs.Var(&streams, "stream", "a stream to create, name=shards (repeatable)")
	fs.Var(&patterns, "pattern-streams", "streams to create, prefix:count:shards, named prefix0..prefix<count-1> (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	srv, err := kinesissim.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	for _, p := range patterns {
		streams = append(streams, p...)
	}
	for _, s := range streams {
		if err := srv.CreateStream(s.name, s.shards); err != nil {
			return fmt.Errorf("creating stream %s: %w", s.name, err)
		}
	}
	fmt.Fprintf(stdout, "kinesissim listening on %s\n", srv.Endpoint())
	<-ctx.Done()
	calls := srv.Calls()
	ops := make([]string, 0, len(calls))
	for op := range calls {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		fmt.Fprintf(stderr, "%s %d\n", op, calls[op])
	}
	return srv.Close()
}
