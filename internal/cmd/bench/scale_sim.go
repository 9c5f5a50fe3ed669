package main

import (
	"context"
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesissim"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The simulator serves the scale part in this process: `-kinesis sim`.
// It counts its own calls, so no proxy stands in front of it, and its CPU
// is the bench's.
func init() {
	scaleBackends["sim"] = startSimScale
}

type simScale struct {
	srv *kinesissim.Server
}

func startSimScale(ctx context.Context, _ int) (scaleKinesis, error) {
	srv, err := kinesissim.Start(ctx, kinesissim.Options{Addr: "127.0.0.1:0", Region: testenv.Region, AccountID: "123456789012"})
	if err != nil {
		return nil, fmt.Errorf("starting the Kinesis simulator: %w", err)
	}
	return &simScale{srv: srv}, nil
}

func (s *simScale) Endpoint() string { return s.srv.Endpoint() }

func (s *simScale) CreateStream(ctx context.Context, name string, shards int) (string, error) {
	if err := s.srv.CreateStream(name, shards); err != nil {
		return "", fmt.Errorf("creating stream %s: %w", name, err)
	}
	// The ARN, as the inputs resolve it, from the simulator's own answer.
	return (&testenv.Kinesis{Endpoint: s.srv.Endpoint()}).WaitActive(ctx, name)
}

func (s *simScale) Calls() map[string]int64 { return s.srv.Calls() }
func (s *simScale) PID() int                { return 0 }
func (s *simScale) Close()                  { _ = s.srv.Close() }
