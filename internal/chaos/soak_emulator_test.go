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
	"syscall"
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
	go func() { defer close(done); s.watchEmulator(ctx, probe, 10*time.Millisecond, time.Second, time.Minute) }()

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
	assert.NoError(t, s.emulatorGone(), "a stall is not a gone emulator")
}

// A TLS port that refuses connections for the whole of goneAfter is a
// server that stopped listening (seed 11 with efo: kinesis-mock's, for
// the last 46 minutes of the hour): the soak takes the emulator for gone
// and says so, where a port that listens and completes no handshake for
// as long is a stall, and refusals that stop in time are neither.
func TestSoakTakesAnEmulatorWhosePortRefusesForGone(t *testing.T) {
	newSoak := func() *soak {
		return &soak{runner: &runner{logf: t.Logf}, start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := closed.Addr().String()
	require.NoError(t, closed.Close())
	silent := silentListener(t)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	watch := func(s *soak, probe func(context.Context) error, d time.Duration) {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		s.watchEmulator(ctx, probe, 10*time.Millisecond, 50*time.Millisecond, 300*time.Millisecond)
	}

	gone := newSoak()
	watch(gone, tlsProbe(refusing, cfg), 2*time.Second)
	err = gone.emulatorGone()
	require.Error(t, err, "a port refusing connections for 2 s was not taken for a server gone")
	assert.Contains(t, err.Error(), "stopped listening")

	stalled := newSoak()
	watch(stalled, tlsProbe(silent.Addr().String(), cfg), 2*time.Second)
	assert.NoError(t, stalled.emulatorGone(), "a port that listens and completes no handshake is a stall")
	assert.Positive(t, stalled.emulatorStalledFor())

	var n atomic.Int32
	flapping := newSoak()
	watch(flapping, func(ctx context.Context) error {
		if n.Add(1)%10 == 0 { // answers every 100 ms: refusals never last 300 ms
			return nil
		}
		return tlsProbe(refusing, cfg)(ctx)
	}, 2*time.Second)
	assert.NoError(t, flapping.emulatorGone(), "refusals that end in time are no server gone")
}

// silentListener accepts connections and holds them open, silent: a port
// that listens and completes no handshake.
func silentListener(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln
}

// The probe fails on a port that accepts connections and never completes
// a handshake, and succeeds on a TLS server.
func TestTLSProbeNeedsAHandshake(t *testing.T) {
	ln := silentListener(t)
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

// kinesis-mock's process ending is the emulator gone, at once and named
// (seed 13 with efo: both its ports refused from 38 minutes and the run
// ended on a DeleteStream the refusals failed, dated when that operation
// was drawn). What the run meets after that end is reported after it.
func TestIntegrationSoakTakesAnEmulatorThatExitedForGone(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	s := &soak{runner: &runner{logf: t.Logf}, start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchExit(ctx, emu.Process().Done(), emu.Process().Err) }()

	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.emulatorGone(), "a running emulator is not gone")
	deleteErr := errors.New(`deleting stream soak-dyn-2: dial tcp 127.0.0.1:42827: connect: connection refused`)
	assert.Equal(t, deleteErr, s.blameEmulator(deleteErr), "an error while the emulator runs is the run's own")

	emu.Process().Kill()
	require.Eventually(t, func() bool { return s.emulatorGone() != nil }, 5*time.Second, 10*time.Millisecond,
		"the emulator's process ended and the soak did not take it for gone")
	<-watched
	gone := s.emulatorGone()
	assert.Contains(t, gone.Error(), "kinesis-mock exited at t=")
	assert.Contains(t, gone.Error(), "signal: killed", "how it ended")

	blamed := s.blameEmulator(deleteErr)
	require.ErrorIs(t, blamed, gone, "the emulator's end comes first")
	assert.Contains(t, blamed.Error(), "what the run met first: deleting stream soak-dyn-2")
	assert.Equal(t, gone, s.blameEmulator(gone), "the end is not named twice")

	// A stopped watch (the run over, the soak stopping the emulator
	// itself) takes nothing for gone.
	quiet := &soak{runner: &runner{logf: t.Logf}, start: time.Now()}
	stopped, stop := context.WithCancel(t.Context())
	stop()
	never := make(chan struct{})
	quiet.watchExit(stopped, never, func() error { return nil })
	assert.NoError(t, quiet.emulatorGone())
}

// A refused connection the run meets is checked against the emulator's
// plain port at once: nothing listening there is the emulator gone,
// whether or not its process runs (seed 13: both ports refused, the run
// ended on a refused DeleteStream). A refusal while the port listens, or
// another error, stays the run's own.
func TestSoakBlamesARefusedCallOnAnEmulatorThatStoppedListening(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := closed.Addr().String()
	require.NoError(t, closed.Close())
	_, refusal := net.Dial("tcp", refusing)
	require.ErrorIs(t, refusal, syscall.ECONNREFUSED)
	callErr := fmt.Errorf("deleting stream soak-dyn-2: %w", errors.Join(refusal, errors.New("failed to get rate limit token, retry quota exceeded")))
	newSoak := func(endpoint string) *soak {
		return &soak{runner: &runner{logf: t.Logf, kin: &testenv.Kinesis{Endpoint: "http://" + endpoint}}, start: time.Now()}
	}

	down := newSoak(refusing)
	blamed := down.blameEmulator(callErr)
	require.Error(t, down.emulatorGone(), "nothing listens on the plain port, and the emulator was not taken for gone")
	assert.Contains(t, blamed.Error(), "kinesis-mock's plain port refuses connections at t=")
	assert.Contains(t, blamed.Error(), "what the run met first: deleting stream soak-dyn-2")

	listening := silentListener(t)
	up := newSoak(listening.Addr().String())
	assert.Equal(t, callErr, up.blameEmulator(callErr), "the plain port listens: the refusal was not the emulator's end")
	assert.NoError(t, up.emulatorGone())

	other := errors.New("the shadow did not read soak-dyn-3#4 for 5 minutes")
	quiet := newSoak(refusing)
	assert.Equal(t, other, quiet.blameEmulator(other), "no refusal in the error: the port is not even checked")
	assert.NoError(t, quiet.emulatorGone())
}
