package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// schedule runs the events of the plan at their offsets from start.
func (r *runner) schedule(ctx context.Context, start time.Time) error {
	p := r.plan
	type event struct {
		at   time.Duration
		name string
		do   func(context.Context) error
	}
	var evs []event
	for at := p.KillEvery; at < p.Load-p.KillEvery/2; at += p.KillEvery {
		// A dead instance cannot re-seed what it held: its shards would be
		// read again from the group's start (duplicates beyond the bound,
		// never a loss). Kills stay clear of an empty restart.
		if r.cfg.EmptyRedis && (at-p.RedisRestart).Abs() < 3*p.LeasePeriod+p.RestartAfter+2*time.Second {
			continue
		}
		// A kill after the pause could end the paused holder, which must
		// wake and re-seed the parent it held.
		if r.cfg.ClosesParent && at > p.RedisRestart {
			continue
		}
		evs = append(evs, event{at, "kill", r.killRandom})
	}
	for _, at := range p.Splits {
		evs = append(evs, event{at, "split", r.split})
	}
	if r.cutter != nil {
		for at := p.KillEvery / 2; at < p.Load; at += p.KillEvery {
			evs = append(evs, event{at, "cut subscriptions", func(context.Context) error {
				r.cuts.Add(int64(r.cutter.Cut()))
				return nil
			}})
		}
	}
	// With ClosesParent the Redis restart closes parents of its own; a
	// merge in it would race its split.
	if !r.cfg.ClosesParent {
		evs = append(evs, event{p.Merge, "merge", r.merge})
	}
	evs = append(evs, event{p.RedisRestart, r.restartName(), r.restartRedis})
	switch {
	case r.cfg.ClosesParent:
		// The Redis restart under the paused holder takes until past
		// RedisPause: a pause would fall into it.
	case r.cfg.RedisStalls:
		evs = append(evs, event{p.RedisPause, "redis stalls", r.stallRedis})
	default:
		evs = append(evs, event{p.RedisPause, "redis pause", r.pauseRedis})
	}
	if r.cfg.OutputDown > 0 {
		evs = append(evs, event{outputDownAt, fmt.Sprintf("output down %v", r.cfg.OutputDown), r.outputGoesDown})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	var wg sync.WaitGroup
	errs := make(chan error, len(evs))
	for _, ev := range evs {
		select {
		case <-time.After(time.Until(start.Add(ev.at))):
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		r.logf("chaos: t=%v %s", ev.at, ev.name)
		// Events run concurrently: a kill does not wait for a Redis pause.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ev.do(ctx); err != nil {
				errs <- fmt.Errorf("%s at t=%v: %w", ev.name, ev.at, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
