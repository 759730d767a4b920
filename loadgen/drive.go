package main

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Summary is a run's figures, the JSON wirelab_bench.loadgen reads.
type Summary struct {
	Protocol    string             `json:"protocol"`
	Mode        string             `json:"mode"`
	Arrivals    string             `json:"arrivals"`
	OfferedPerS float64            `json:"offered_per_s"`
	Seconds     float64            `json:"seconds"`
	Workers     int                `json:"workers"`
	Scheduled   int                `json:"scheduled"`
	Started     int                `json:"started"`
	Dropped     int                `json:"dropped"`
	Answered    int                `json:"answered"`
	Failed      int                `json:"failed"`
	Late        int                `json:"late"`
	LatencyMs   map[string]float64 `json:"latency_ms"`
	StartLagMs  map[string]float64 `json:"start_lag_ms"`
	CPUSeconds  float64            `json:"cpu_seconds"`
	// The open loop's schedule within -window-from to -window-to (the runner's measured window,
	// its warm-up left out); absent without a window.
	Window *Window `json:"window,omitempty"`
}

// Window is the schedule's figures for the calls intended to start in [FromS, ToS) of the run.
type Window struct {
	FromS      float64            `json:"from_s"`
	ToS        float64            `json:"to_s"`
	Scheduled  int                `json:"scheduled"`
	Dropped    int                `json:"dropped"`
	StartLagMs map[string]float64 `json:"start_lag_ms"`
}

func (w *Window) holds(at time.Duration) bool {
	return at >= seconds(w.FromS) && at < seconds(w.ToS)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// worker holds one worker's own counts, merged when the run ends (no lock per call).
type worker struct {
	latency, lag, windowLag Tally
	answered, failed, late  int
}

func (w *worker) call(caller Caller, metrics *Instruments, from time.Time, failOver time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	result := caller.Call(ctx)
	cancel()
	took := time.Since(from)
	w.latency.Add(took)
	w.answered++
	switch {
	case result.Outcome != "ok":
		w.failed++
	case failOver > 0 && took > failOver:
		// Answered too late: a failed call in the series, as Locust's --fail-over-ms counts it
		// (outcome failure), and late, not failed, in the summary.
		w.late++
		result.Outcome = "failure"
	}
	metrics.Record(result, took.Seconds())
}

// Drive runs the load for o.Seconds (or until ctx ends), writing the series to writer (if any)
// every second, and returns the figures. Calls started before the end are waited for and
// counted, as a scheduled call is never lost.
func Drive(ctx context.Context, caller Caller, metrics *Instruments, writer *RemoteWriter, o *Options) *Summary {
	cpu := cpuSeconds()
	workers := make([]*worker, o.Workers)
	for i := range workers {
		workers[i] = &worker{}
	}
	failOver := time.Duration(o.FailOverMs * float64(time.Millisecond))
	length := time.Duration(o.Seconds * float64(time.Second))
	done := make(chan struct{})
	lastCPU, lastAt := cpu, time.Now()
	go every(time.Second, done, func() {
		// The generator's own CPU over the last second, as a Locust child reports its own.
		now, at := cpuSeconds(), time.Now()
		metrics.CPU.Set((now - lastCPU) / at.Sub(lastAt).Seconds())
		lastCPU, lastAt = now, at
		if writer != nil {
			_ = writer.Write(ctx, at)
		}
	})
	s := &Summary{Protocol: o.Protocol, Mode: o.Mode, Arrivals: o.Arrivals, Workers: o.Workers}
	if o.Mode == "open" && o.WindowTo > 0 {
		s.Window = &Window{FromS: o.WindowFrom, ToS: o.WindowTo}
	}
	start := time.Now()
	if o.Mode == "open" {
		s.OfferedPerS = o.Rate
		open(ctx, caller, metrics, workers, NewSchedule(o.Rate, o.Arrivals == "poisson", o.Seed), start, length, failOver, s)
	} else {
		s.Arrivals = ""
		closed(ctx, caller, metrics, workers, start.Add(length), failOver)
	}
	close(done)
	// The run's length, which rates are per; shorter only when a signal ended it early.
	s.Seconds = length.Seconds()
	if ctx.Err() != nil {
		s.Seconds = min(time.Since(start), length).Seconds()
	}
	var latency, lag, windowLag Tally
	for _, w := range workers {
		latency.Merge(&w.latency)
		lag.Merge(&w.lag)
		windowLag.Merge(&w.windowLag)
		s.Answered += w.answered
		s.Failed += w.failed
		s.Late += w.late
	}
	if o.Mode == "closed" {
		s.Started = s.Answered
	}
	s.LatencyMs = latency.Millis()
	s.StartLagMs = lag.Millis()
	delete(s.StartLagMs, "mean")
	delete(s.StartLagMs, "p95")
	if s.Window != nil {
		s.Window.StartLagMs = windowLag.Millis()
		delete(s.Window.StartLagMs, "mean")
		delete(s.Window.StartLagMs, "p95")
	}
	s.CPUSeconds = cpuSeconds() - cpu
	return s
}

// open hands each scheduled call to a free worker at its intended time; with none free it is
// not started late but dropped and counted, and each call's duration runs from its intended
// start, so neither a slow service nor a busy generator hides a queue.
func open(
	ctx context.Context, caller Caller, metrics *Instruments, workers []*worker, schedule *Schedule,
	start time.Time, length, failOver time.Duration, s *Summary,
) {
	// A token per idle worker: taking one guarantees the call a worker that starts it at once,
	// even before that worker's goroutine first runs.
	free := make(chan struct{}, len(workers))
	due := make(chan time.Time, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		free <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for intended := range due {
				late := time.Since(intended)
				w.lag.Add(late)
				if s.Window != nil && s.Window.holds(intended.Sub(start)) {
					w.windowLag.Add(late)
				}
				w.call(caller, metrics, intended, failOver)
				free <- struct{}{}
			}
		}()
	}
	preciseSleeps()
	defer runtime.UnlockOSThread()
	for at := schedule.Next(); at < length && ctx.Err() == nil; at = schedule.Next() {
		intended := start.Add(at)
		sleepUntil(intended)
		s.Scheduled++
		counted := s.Window != nil && s.Window.holds(at)
		if counted {
			s.Window.Scheduled++
		}
		select {
		case <-free:
			due <- intended
			s.Started++
		default:
			s.Dropped++
			if counted {
				s.Window.Dropped++
			}
		}
	}
	close(due)
	wg.Wait()
}

// closed runs each worker as a user sending its next call when the last is answered, until end.
func closed(ctx context.Context, caller Caller, metrics *Instruments, workers []*worker, end time.Time, failOver time.Duration) {
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				w.call(caller, metrics, time.Now(), failOver)
			}
		}()
	}
	wg.Wait()
}

// preciseSleeps gives the calling goroutine an OS thread of its own whose sleeps end within tens
// of microseconds. Go's own timers wake through the network poller, whose waits are whole
// milliseconds: time.Sleep(100 µs) overslept by 1.0 ms at the median here (3.6 ms at p99),
// which would have started calls at 1,000 calls/s up to a full gap late. A nanosleep on this
// thread, with the kernel's timer slack cut from 50 µs to 1 ns, overslept by 10 µs (p99 54 µs).
func preciseSleeps() {
	runtime.LockOSThread()
	const prSetTimerslack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
}

// sleepUntil blocks the thread (not only the goroutine) until t; the other goroutines run on the
// process's other Ps (main sets at least two).
func sleepUntil(t time.Time) {
	wait := time.Until(t)
	if wait <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(wait))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

func every(period time.Duration, done <-chan struct{}, f func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			f()
		}
	}
}

// cpuSeconds is this process's user and system CPU so far.
func cpuSeconds() float64 {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}
