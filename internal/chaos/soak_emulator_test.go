package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A stall of the emulator's TLS port is held as a fault under way on every
// stream from the first failed probe to the first one that succeeds, noted
// at both ends, and counted with its length.
func TestSoakHoldsAnEmulatorStallAsAFault(t *testing.T) {
	var mu sync.Mutex
	var notes []string
	s := &soak{runner: &runner{logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, fmt.Sprintf(f, a...))
	}}, start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	var calls atomic.Int32
	stalled := make(chan struct{})
	resume := make(chan struct{})
	probe := func(context.Context) error {
		switch n := calls.Add(1); {
		case n == 2:
			close(stalled)
			return errors.New("tls: handshake timeout")
		case n > 2:
			select {
			case <-resume:
			default:
				return errors.New("tls: handshake timeout")
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); s.watchEmulator(ctx, probe, 10*time.Millisecond, time.Second) }()

	<-stalled
	require.Eventually(t, func() bool { _, quiet := s.quietSince("soak-a"); return !quiet }, 5*time.Second, 10*time.Millisecond,
		"a stall is a fault under way on every stream")
	time.Sleep(50 * time.Millisecond) // more failed probes: still one stall
	assert.Positive(t, s.emulatorStalledFor())
	close(resume)
	require.Eventually(t, func() bool {
		s.smu.Lock()
		defer s.smu.Unlock()
		return s.emuStalls == 1 && s.emuStallSince.IsZero()
	}, 5*time.Second, 10*time.Millisecond)
	since, quiet := s.quietSince("soak-a")
	assert.True(t, quiet, "the stall ended")
	assert.False(t, since.IsZero(), "liveness counts from its end")
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	var stalls, backs int
	for _, n := range notes {
		stalls += strings.Count(n, "completed no handshake")
		backs += strings.Count(n, "answers again")
	}
	assert.Equal(t, 1, stalls, "one note for the stall, however many probes failed: %v", notes)
	assert.Equal(t, 1, backs, notes)
}

// The probe fails on a port that accepts connections and never completes
// a handshake, and succeeds on a TLS server.
func TestTLSProbeNeedsAHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // held open, silent
		}
	}()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	assert.Error(t, tlsProbe(ln.Addr().String(), cfg)(ctx), "no handshake")
	assert.NoError(t, tlsProbe(strings.TrimPrefix(srv.URL, "https://"), cfg)(t.Context()))
}

// The wait for a stream to be ACTIVE does not count the time the probe
// held the emulator stalled: a stall that outlasts the patience delays the
// wait instead of ending the run. Without a stall the patience holds.
func TestWaitActiveWaitsOutAnEmulatorStall(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	ctx := t.Context()
	began := time.Now()
	stallEnds := began.Add(3 * time.Second)
	r := &runner{kin: emu, kc: emu.Client(), logf: t.Logf, patience: time.Second,
		// A stall under way from the start, for 3 s.
		stalledFor: func() time.Duration { return min(time.Since(began), stallEnds.Sub(began)) }}
	const name = "late"
	go func() {
		time.Sleep(2500 * time.Millisecond)
		_, _ = emu.Client().CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)})
	}()
	_, err := r.waitActive(ctx, name)
	require.NoError(t, err, "the stream came ACTIVE after the patience, during the stall")

	calm := &runner{kin: emu, kc: emu.Client(), logf: t.Logf, patience: time.Second, stalledFor: func() time.Duration { return 0 }}
	start := time.Now()
	_, err = calm.waitActive(ctx, "never")
	require.Error(t, err)
	assert.Less(t, time.Since(start), 20*time.Second, "no stall: the patience holds")
}
