package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The two contract families a generator run fills, as the Locust and Node.js clients fill them:
// calls by outcome, and their whole duration (measured from the intended start in open mode).
const (
	requestsFamily = "wirelab_client_requests"
	durationFamily = "wirelab_client_request_duration_seconds"
	sentFamily     = "wirelab_client_messages_sent"
	receivedFamily = "wirelab_client_messages_received"
	bytesOutFamily = "wirelab_client_request_bytes"
	bytesInFamily  = "wirelab_client_response_bytes"
	usersFamily    = "wirelab_client_users"
	cpuFamily      = "wirelab_client_cpu_usage_ratio"
)

// Instruments are a run's series, in a registry of their own: the contract's client families a
// unary call fills (calls by outcome, duration, body bytes, messages), and the generator's own
// gauges the runner reads from a Locust child's page too (users, CPU).
type Instruments struct {
	Registry *prometheus.Registry
	// One counter per outcome, looked up once: a With() per call hashes the label values.
	requests          map[string]prometheus.Counter
	duration          prometheus.Observer
	bytesOut, bytesIn prometheus.Observer
	sent, received    prometheus.Counter
	Users, CPU        prometheus.Gauge
}

// NewInstruments registers the families for one protocol's order call to one peer, with every
// outcome at zero so a panel reads 0 before the first call, not "no data".
func NewInstruments(c *Contract, protocol, peer string) *Instruments {
	labels := prometheus.Labels{"protocol": protocol, "kind": "unary", "call": "ProcessOrder", "peer": peer}
	names := []string{"protocol", "kind", "call", "peer"}
	histogram := func(name string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: c.Help(name), Buckets: buckets}, names)
	}
	// client_golang writes a counter under the name it is given: the contract's family name,
	// plus the _total every counter sample has in the text format (client_python and
	// prom-client add it themselves).
	counter := func(name string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_total", Help: c.Help(name)}, labels)
	}
	requests := counter(requestsFamily, append(names, "outcome"))
	duration := histogram(durationFamily, c.Buckets.Duration)
	bytesOut, bytesIn := histogram(bytesOutFamily, c.Buckets.Size), histogram(bytesInFamily, c.Buckets.Size)
	sent, received := counter(sentFamily, names), counter(receivedFamily, names)
	users := prometheus.NewGauge(prometheus.GaugeOpts{Name: usersFamily, Help: c.Help(usersFamily)})
	cpu := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: cpuFamily, Help: c.Help(cpuFamily)}, []string{"instance_name"})
	registry := prometheus.NewRegistry()
	registry.MustRegister(requests, duration, bytesOut, bytesIn, sent, received, users, cpu)
	counters := map[string]prometheus.Counter{}
	for _, outcome := range c.AllOutcomes() {
		counters[outcome] = requests.With(with(labels, "outcome", outcome))
	}
	return &Instruments{
		Registry: registry, requests: counters, duration: duration.With(labels),
		bytesOut: bytesOut.With(labels), bytesIn: bytesIn.With(labels),
		sent: sent.With(labels), received: received.With(labels),
		Users: users, CPU: cpu.WithLabelValues("loadgen"),
	}
}

// Record counts one finished call; an outcome the contract does not know is a failure. A call
// sends one message; it receives one when it was answered with a body.
func (m *Instruments) Record(r Result, seconds float64) {
	counter, ok := m.requests[r.Outcome]
	if !ok {
		counter = m.requests["failure"]
	}
	counter.Inc()
	m.duration.Observe(seconds)
	m.bytesOut.Observe(float64(r.Sent))
	m.bytesIn.Observe(float64(r.Received))
	m.sent.Inc()
	if r.Outcome == "ok" {
		m.received.Inc()
	}
}

func with(labels prometheus.Labels, name, value string) prometheus.Labels {
	out := prometheus.Labels{name: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}
