package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// kinesis-mock is one Node.js process. Under an hour's load with the efo
// class its TLS port, the fan-out readers' only way in, stops completing
// handshakes for minutes at a time while its plain port answers (seed 9,
// 1 h with efo: from 16:25:32 to 16:28 and from 16:36 to 16:38 every
// fan-out reader's SubscribeToShard and ListShards failed with "TLS
// handshake timeout" or EOF, across six instances). A reader that cannot
// reach Kinesis cannot read, and holding its leases is what Kinesis
// consumers do (KCL too): the shards wait for Kinesis, not for the input.
// The soak probes the port and holds such a stall as a fault under way on
// every stream, so liveness and a deletion's wait for the stream's
// records count from its end, and the report says how many stalls there
// were and how long they lasted in all.
const (
	// emuProbeEvery is the probes' pace; one handshake every few seconds
	// is nothing next to the readers' load.
	emuProbeEvery = 3 * time.Second
	// emuProbeTimeout is the Go HTTP transport's own TLS handshake
	// timeout, which the readers' calls hit.
	emuProbeTimeout = 10 * time.Second
	// emuGoneAfter is how long the TLS port may refuse connections before
	// the soak takes kinesis-mock's TLS server for gone. A stall completes
	// no handshake on a port that still listens; a refusal means nothing
	// listens. Seed 11 with efo (1 h): from 24 min the port refused every
	// connection while the plain port answered, for the rest of the hour
	// (268 connections of the TLS server left in CLOSE-WAIT, nothing in
	// kinesis-mock's log), and the soak went on for 46 minutes that could
	// not judge a fan-out reader. A few seconds of refusals (seed 8's plain
	// port) do not count.
	emuGoneAfter = time.Minute
)

// tlsProbe completes one TLS handshake with addr and closes.
func tlsProbe(addr string, cfg *tls.Config) func(context.Context) error {
	return func(ctx context.Context) error {
		d := tls.Dialer{Config: cfg}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// watchEmulator probes every `every` until ctx ends; a probe that fails
// begins a stall, the next one that succeeds ends it.
// A port that refuses connections for goneAfter is gone (emulatorGone).
func (s *soak) watchEmulator(ctx context.Context, probe func(context.Context) error, every, timeout, goneAfter time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.endStall(false)
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			continue
		}
		s.noteRefusal(err, goneAfter)
		if err != nil {
			s.emulatorStalled(err)
		} else {
			s.endStall(true)
		}
	}
}

// noteRefusal follows how long the TLS port has refused connections; past
// goneAfter the emulator is gone (emulatorGone).
func (s *soak) noteRefusal(err error, goneAfter time.Duration) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		s.emuRefusedSince = time.Time{}
		return
	}
	now := time.Now()
	if s.emuRefusedSince.IsZero() {
		s.emuRefusedSince = now
	}
	if s.emuGone == nil && now.Sub(s.emuRefusedSince) >= goneAfter {
		s.emuGone = fmt.Errorf("kinesis-mock's TLS server stopped listening: its port has refused every connection since t=%v (%v), while a stall only completes no handshake; the fan-out readers cannot reach the emulator again, so the rest of the run could not be judged (the emulator, not the input)",
			s.emuRefusedSince.Sub(s.start).Round(100*time.Millisecond), err)
	}
}

// watchExit takes the emulator for gone once its process ends (done
// closed, status says how) before ctx does. Seed 13 with efo (1 h): at
// 38 min both of kinesis-mock's ports refused connections with nothing in
// its log, and the run ended on what that caused first, a DeleteStream of
// the streams class that failed "at t=19m5s" (when that operation was
// drawn), which named neither the emulator nor the time it went.
func (s *soak) watchExit(ctx context.Context, done <-chan struct{}, status func() error) {
	select {
	case <-ctx.Done():
		return
	case <-done:
	}
	how := "exit status 0"
	if err := status(); err != nil {
		how = err.Error()
	}
	at := time.Since(s.start).Round(100 * time.Millisecond)
	s.smu.Lock()
	if s.emuGone == nil {
		s.emuGone = fmt.Errorf("kinesis-mock exited at t=%v (%s; what it printed last is at the end of kinesis-mock.log): every call to it is refused from then on, so the rest of the run could not be judged (the emulator, not the input)", at, how)
	}
	s.smu.Unlock()
	s.note("emulator: kinesis-mock exited (%s)", how)
}

// blameEmulator names the emulator's end first when err came after it:
// what a run meets once kinesis-mock is gone (a call refused, a stream
// not read) follows from that end. A refused connection in err is
// checked at once against the emulator's plain port, the way in of the
// soak's own calls, the producers and the polling readers: when nothing
// listens there either, the emulator is gone, whether or not its process
// still runs.
func (s *soak) blameEmulator(err error) error {
	if err == nil {
		return nil
	}
	gone := s.emulatorGone()
	if gone == nil && errors.Is(err, syscall.ECONNREFUSED) && s.kin != nil {
		gone = s.plainRefused()
	}
	if gone == nil || errors.Is(err, gone) {
		return err
	}
	return fmt.Errorf("%w; what the run met first: %v", gone, err)
}

// plainRefused takes the emulator for gone when its plain port refuses a
// connection now, and says why; nil when the port takes it.
func (s *soak) plainRefused() error {
	addr := strings.TrimPrefix(s.kin.Endpoint, "http://")
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		_ = c.Close()
		return nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.emuGone == nil {
		s.emuGone = fmt.Errorf("kinesis-mock's plain port refuses connections at t=%v (%v): nothing listens where the soak, the producers and the polling readers reach it, so the rest of the run could not be judged (the emulator, not the input)",
			time.Since(s.start).Round(100*time.Millisecond), err)
	}
	return s.emuGone
}

// emulatorGone says why the emulator can no longer be read from, or nil.
func (s *soak) emulatorGone() error {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.emuGone
}

// emulatorStalled begins a stall unless one is under way.
func (s *soak) emulatorStalled(err error) {
	s.smu.Lock()
	began := s.emuStallSince.IsZero()
	if began {
		s.emuStallSince = time.Now()
	}
	s.smu.Unlock()
	if began {
		s.faultBegin("")
		s.note("emulator: kinesis-mock's TLS port completed no handshake (%v); a stall, held as a fault under way on every stream until it answers", err)
	}
}

// endStall ends the stall under way, if any: the port answered again, or
// (answered false) the run ended inside the stall. Only the watch calls
// it, so the stall it reads is still under way when it counts it.
func (s *soak) endStall(answered bool) {
	s.smu.Lock()
	since := s.emuStallSince
	s.smu.Unlock()
	if since.IsZero() {
		return
	}
	s.faultEnd("")
	d := time.Since(since)
	s.smu.Lock()
	s.emuStalls++
	s.emuStalled += d
	s.emuStallSince = time.Time{}
	s.smu.Unlock()
	if answered {
		s.note("emulator: kinesis-mock's TLS port answers again, after %v", d.Round(100*time.Millisecond))
		return
	}
	s.note("emulator: the run ended inside a stall of kinesis-mock's TLS port, %v long so far", d.Round(100*time.Millisecond))
}

// emulatorStalledFor is the time the emulator stalled so far, the stall
// under way included.
func (s *soak) emulatorStalledFor() time.Duration {
	s.smu.Lock()
	defer s.smu.Unlock()
	d := s.emuStalled
	if !s.emuStallSince.IsZero() {
		d += time.Since(s.emuStallSince)
	}
	return d
}
