// Command wirelab-loadgen sends the contract's small order call (gRPC ProcessOrder or REST
// POST /v1/orders) at a fixed arrival rate (open loop) or from a fixed number of users (closed
// loop), writes the run's figures as JSON and, with -remote-write, its wirelab_client_* series
// into the lab's Prometheus. It is the lab's precise generator beside Locust: one scheduler and
// one clock for both protocols, so the two are driven and timed alike (docs/bench.md).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options are the command line.
type Options struct {
	Protocol, Target, Body, Proto, Contract string
	Mode, Arrivals                          string
	Rate                                    float64
	Workers, Connections                    int
	Seconds, FailOverMs                     float64
	WindowFrom, WindowTo                    float64
	Seed                                    int64
	Summary, RemoteWrite, Peer, HTTP        string
	MetricsAddr                             string
	Labels                                  labelFlags
}

type labelFlags map[string]string

func (l labelFlags) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	l[name] = value
	return nil
}

func parse(args []string) (*Options, error) {
	o := &Options{Labels: labelFlags{}}
	fs := flag.NewFlagSet("wirelab-loadgen", flag.ContinueOnError)
	fs.StringVar(&o.Protocol, "protocol", "", "rest or grpc")
	fs.StringVar(&o.Target, "target", "", "http://host:port (rest) or host:port (grpc)")
	fs.StringVar(&o.Body, "body", "", "the order request as JSON (the REST body; proto JSON names)")
	fs.StringVar(&o.Proto, "proto", "", "grpc: the folder holding wirelab/v1/wirelab.proto")
	fs.StringVar(&o.HTTP, "http", "1.1", "rest: 1.1, or h2c (cleartext HTTP/2, prior knowledge)")
	fs.StringVar(&o.Contract, "contract", "", "the metric contract, contract/metrics.json")
	fs.StringVar(&o.Mode, "mode", "open", "open: calls start on a schedule; closed: -workers users each wait for their answer")
	fs.StringVar(&o.Arrivals, "arrivals", "constant", "open mode: constant (evenly spaced) or poisson")
	fs.Float64Var(&o.Rate, "rate", 0, "open mode: calls per second")
	fs.IntVar(&o.Workers, "workers", 10, "calls in flight at most (open) or users (closed)")
	fs.IntVar(&o.Connections, "connections", 0, "grpc: connections the workers share (0: one per worker)")
	fs.Float64Var(&o.Seconds, "seconds", 10, "length of the run")
	fs.Float64Var(&o.WindowFrom, "window-from", 0, "open mode: the summary's window starts this many seconds into the run (the runner's warm-up)")
	fs.Float64Var(&o.WindowTo, "window-to", 0, "open mode: ... and ends here; the window's schedule gets figures of its own (0: no window)")
	fs.Float64Var(&o.FailOverMs, "fail-over-ms", 0, "answers slower than this count as late (0: none)")
	fs.Int64Var(&o.Seed, "seed", 1, "poisson arrivals: the random seed")
	fs.StringVar(&o.Summary, "summary", "", "write the run's figures here as JSON (else to stdout)")
	fs.StringVar(&o.RemoteWrite, "remote-write", "", "Prometheus remote-write URL, e.g. http://127.0.0.1:9090/api/v1/write")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve the run's series at http://this/metrics (host:port), as a Locust child does for the runner")
	fs.StringVar(&o.Peer, "peer", "", "the peer label: the service called (default: the target's host)")
	fs.Var(o.Labels, "label", "name=value added to every series written (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, o.check()
}

func (o *Options) check() error {
	switch {
	case o.Protocol != "rest" && o.Protocol != "grpc":
		return fmt.Errorf("-protocol %q: want rest or grpc", o.Protocol)
	case o.Target == "":
		return fmt.Errorf("-target is required")
	case o.Contract == "":
		return fmt.Errorf("-contract is required")
	case o.Protocol == "grpc" && o.Proto == "":
		return fmt.Errorf("-proto is required for grpc")
	case o.HTTP != "1.1" && o.HTTP != "h2c":
		return fmt.Errorf("-http %q: want 1.1 or h2c", o.HTTP)
	case o.Mode != "open" && o.Mode != "closed":
		return fmt.Errorf("-mode %q: want open or closed", o.Mode)
	case o.Arrivals != "constant" && o.Arrivals != "poisson":
		return fmt.Errorf("-arrivals %q: want constant or poisson", o.Arrivals)
	case o.Mode == "open" && !(o.Rate > 0):
		return fmt.Errorf("-rate must be above 0 in open mode")
	case o.Workers < 1 || o.Workers > 10000:
		return fmt.Errorf("-workers %d: want 1 to 10000", o.Workers)
	case o.Connections < 0:
		return fmt.Errorf("-connections %d: want 0 or more", o.Connections)
	case !(o.Seconds > 0) || o.Seconds > 3600:
		return fmt.Errorf("-seconds %g: want above 0, at most 3600", o.Seconds)
	case o.WindowFrom < 0 || o.WindowTo < 0 || (o.WindowTo > 0 && o.WindowTo <= o.WindowFrom) || o.WindowTo > o.Seconds:
		return fmt.Errorf("-window-from %g -window-to %g: want 0 <= from < to <= -seconds", o.WindowFrom, o.WindowTo)
	case o.FailOverMs < 0:
		return fmt.Errorf("-fail-over-ms %g: want 0 or more", o.FailOverMs)
	case o.Protocol == "rest" && !strings.HasPrefix(o.Target, "http://"):
		return fmt.Errorf("-target %q: rest wants http://host:port", o.Target)
	case o.Body == "" || !json.Valid([]byte(o.Body)):
		return fmt.Errorf("-body must be the order request as JSON")
	}
	return nil
}

// peer is the label naming the service called: the target's host, as the Locust client names it.
func (o *Options) peer() string {
	if o.Peer != "" {
		return o.Peer
	}
	host := o.Target
	if u, err := url.Parse(o.Target); err == nil && u.Host != "" {
		host = u.Host
	}
	if name, _, ok := strings.Cut(host, ":"); ok {
		return name
	}
	return host
}

func main() {
	// The scheduler sleeps on a thread of its own (drive.go: preciseSleeps): the workers and
	// the network poller need another P, even when the generator is pinned to one core.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wirelab-loadgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	contract, err := LoadContract(o.Contract)
	if err != nil {
		return err
	}
	caller, err := newCaller(o, contract)
	if err != nil {
		return err
	}
	defer caller.Close()
	// SIGTERM or Ctrl-C ends the run early; what was measured so far is still written.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	metrics := NewInstruments(contract, o.Protocol, o.peer())
	metrics.Users.Set(float64(o.Workers))
	if o.MetricsAddr != "" {
		listener, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		server := &http.Server{Handler: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = server.Serve(listener) }()
		defer server.Close()
	}
	if err := warm(ctx, caller, o); err != nil {
		return err
	}
	var writer *RemoteWriter
	if o.RemoteWrite != "" {
		labels := map[string]string{"job": "loadgen", "service": "loadgen", "generator": "loadgen", "instance": instance()}
		for k, v := range o.Labels {
			labels[k] = v
		}
		writer = NewRemoteWriter(o.RemoteWrite, metrics.Registry, labels)
		if err := writer.Write(ctx, time.Now()); err != nil {
			return err
		}
	}
	summary := Drive(ctx, caller, metrics, writer, o)
	// The summary first: a Prometheus gone away must not lose the run's figures.
	if err := writeSummary(summary, o.Summary); err != nil {
		return err
	}
	if writer != nil {
		// The last figures, so Prometheus holds every call of the run.
		return writer.Write(context.Background(), time.Now())
	}
	return nil
}

func newCaller(o *Options, c *Contract) (Caller, error) {
	if o.Protocol == "rest" {
		return newREST(o.Target, []byte(o.Body), o.Workers, o.HTTP == "h2c"), nil
	}
	connections := o.Connections
	if connections == 0 {
		connections = o.Workers
	}
	return newGRPC(o.Target, []byte(o.Body), o.Proto, connections, c.ClientErrors())
}

// warm sends one call per worker at once before the clock starts (REST then opens each
// worker's connection; gRPC's calls go round the connections), so the run measures calls, not
// connection set-up. A target none of whose calls is answered OK stops the run at once, with
// the outcome as the reason; one that answers some (a saturated service at 300 users) runs.
func warm(ctx context.Context, caller Caller, o *Options) error {
	outcomes := make(chan string, o.Workers)
	for i := 0; i < o.Workers; i++ {
		go func() {
			call, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			outcomes <- caller.Call(call).Outcome
		}()
	}
	last := ""
	for i := 0; i < o.Workers; i++ {
		if outcome := <-outcomes; outcome == "ok" || last != "ok" {
			last = outcome
		}
	}
	if last != "ok" {
		return fmt.Errorf("%s %s: no first call was answered OK (outcome %s)", o.Protocol, o.Target, last)
	}
	return nil
}

func instance() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func writeSummary(s *Summary, path string) error {
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if path == "" {
		_, err = os.Stdout.Write(append(out, '\n'))
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}
