package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The two contract families a generator run fills, as the Locust and Node.js clients fill them:
// calls by outcome, and their whole duration (measured from the intended start in open mode).
const (
	requestsFamily = "wirelab_client_requests"
	durationFamily = "wirelab_client_request_duration_seconds"
)

// Instruments are a run's series, in a registry of their own.
type Instruments struct {
	Registry *prometheus.Registry
	// One counter per outcome, looked up once: a With() per call hashes the label values.
	requests map[string]prometheus.Counter
	duration prometheus.Observer
}

// NewInstruments registers the families for one protocol's order call to one peer, with every
// outcome at zero so a panel reads 0 before the first call, not "no data".
func NewInstruments(c *Contract, protocol, peer string) *Instruments {
	labels := prometheus.Labels{"protocol": protocol, "kind": "unary", "call": "ProcessOrder", "peer": peer}
	names := []string{"protocol", "kind", "call", "peer"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: requestsFamily, Help: c.Help(requestsFamily),
	}, append(names, "outcome"))
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: durationFamily, Help: c.Help(durationFamily), Buckets: c.Buckets.Duration,
	}, names)
	registry := prometheus.NewRegistry()
	registry.MustRegister(requests, duration)
	counters := map[string]prometheus.Counter{}
	for _, outcome := range c.AllOutcomes() {
		counters[outcome] = requests.With(with(labels, "outcome", outcome))
	}
	return &Instruments{Registry: registry, requests: counters, duration: duration.With(labels)}
}

// Record counts one finished call; an outcome the contract does not know is a failure.
func (m *Instruments) Record(outcome string, seconds float64) {
	counter, ok := m.requests[outcome]
	if !ok {
		counter = m.requests["failure"]
	}
	counter.Inc()
	m.duration.Observe(seconds)
}

func with(labels prometheus.Labels, name, value string) prometheus.Labels {
	out := prometheus.Labels{name: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}
