package chaos

import (
	"context"
	"crypto/tls"
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
func (s *soak) watchEmulator(ctx context.Context, probe func(context.Context) error, every, timeout time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.emulatorBack()
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			continue
		}
		if err != nil {
			s.emulatorStalled(err)
		} else {
			s.emulatorBack()
		}
	}
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

// emulatorBack ends the stall under way, if any. Only the watch calls
// it, so the stall it reads is still under way when it counts it.
func (s *soak) emulatorBack() {
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
	s.note("emulator: kinesis-mock's TLS port answers again, after %v", d.Round(100*time.Millisecond))
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
