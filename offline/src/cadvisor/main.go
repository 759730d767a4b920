// Command cadvisor is the lab's offline stand-in for the cAdvisor image: cAdvisor's own
// collector (its lib module: manager, Docker provider, Prometheus collectors) behind the
// command line and the two endpoints the lab uses, /metrics and /healthz.
//
// The Go module proxy serves cAdvisor's library modules but not its cmd module, whose main
// package is what the upstream image runs, so this file stands in for that main package only.
// It declares the flags compose gives cAdvisor that the cmd module owns, with the upstream
// names, defaults and meaning; every other flag (docker_only, housekeeping_interval, ...) is
// the library's own. An unknown flag or metric name stops it at start, as upstream does.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	_ "github.com/google/cadvisor/container/docker/install"
	"github.com/google/cadvisor/lib/cache/memory"
	"github.com/google/cadvisor/lib/container"
	"github.com/google/cadvisor/lib/manager"
	"github.com/google/cadvisor/lib/metrics"
	info "github.com/google/cadvisor/lib/model"
	"github.com/google/cadvisor/lib/utils/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

var (
	listenIP        = flag.String("listen_ip", "", "IP to listen on, defaults to all IPs")
	port            = flag.Int("port", 8080, "port to listen")
	maxAge          = flag.Duration("storage_duration", 2*time.Minute, "How long to keep data stored.")
	storeLabels     = flag.Bool("store_container_labels", true, "convert container labels and environment variables into labels on prometheus metrics for each container. If flag set to false, then only metrics exported are container name, first alias, and image name")
	whitelistLabels = flag.String("whitelisted_container_labels", "", "comma separated list of container labels to be converted to labels on prometheus metrics for each container. store_container_labels must be set to false for this to take effect.")
	envMetadata     = flag.String("env_metadata_whitelist", "", "a comma-separated list of environment variable keys matched with specified prefix that needs to be collected for containers")
	rawPrefixes     = flag.String("raw_cgroup_prefix_whitelist", "", "A comma-separated list of cgroup path prefix that needs to be collected even when -docker_only is specified")
	perfEvents      = flag.String("perf_events_config", "", "Path to a JSON file containing configuration of perf events to measure. Empty value disabled perf events measuring.")
	resctrlInterval = flag.Duration("resctrl_interval", 0, "Resctrl mon groups updating interval. Zero value disables updating mon groups.")
	// None by default here: compose always passes the lab's list, which the library's own
	// MetricSet parses (an unknown name is an error, as upstream).
	disabled = container.MetricSet{}
)

func init() {
	flag.Var(&disabled, "disable_metrics", "comma-separated list of metrics to be disabled")
}

// split is upstream's reading of a list flag: an empty one is [""], which the raw factory
// takes for "no prefix" (nil makes it index out of range under --docker_only).
func split(list string) []string {
	return strings.Split(list, ",")
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if flag.NArg() > 0 {
		klog.Fatalf("unexpected arguments: %v", flag.Args())
	}
	included := container.AllMetrics.Difference(disabled)

	cache := memory.New(*maxAge, nil)
	interval, dynamic := flag.Lookup("housekeeping_interval"), flag.Lookup("allow_dynamic_housekeeping")
	every := interval.Value.(flag.Getter).Get().(time.Duration)
	allow := dynamic.Value.(flag.Getter).Get().(bool)
	m, err := manager.New(cache, sysfs.NewRealSysFs(),
		manager.HousekeepingConfig{Interval: &every, AllowDynamic: &allow},
		included, split(*rawPrefixes), split(*envMetadata), *perfEvents, *resctrlInterval)
	if err != nil {
		klog.Fatalf("failed to create a manager: %v", err)
	}
	if err := m.Start(); err != nil {
		klog.Fatalf("failed to start the manager: %v", err)
	}

	labels := metrics.DefaultContainerLabels
	if !*storeLabels {
		labels = metrics.BaseContainerLabels(split(*whitelistLabels))
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(
		metrics.NewPrometheusCollector(m, labels, included, clock.RealClock{},
			info.RequestOptions{IdType: info.TypeName, Count: 1, Recursive: true}),
		metrics.NewPrometheusMachineCollector(m, included),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	server := &http.Server{Addr: fmt.Sprintf("%s:%d", *listenIP, *port), Handler: mux}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-stop
		_ = m.Stop()
		_ = server.Close()
	}()
	klog.Infof("cadvisor (lib %s) listening on %s", version(), server.Addr)
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		klog.Fatalf("failed to serve: %v", err)
	}
}

// version is the cAdvisor library's module version this binary was built from.
func version() string {
	if build, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range build.Deps {
			if dep.Path == "github.com/google/cadvisor/lib" {
				return dep.Version
			}
		}
	}
	return "unknown"
}
