package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
)

// RemoteWriter sends a registry's samples to Prometheus's remote-write receiver
// (--web.enable-remote-write-receiver), so a run on the host lands in the lab's Prometheus
// beside the series it scrapes, with the target labels a scrape would add (job, instance,
// service, generator). It speaks remote write 1.0, the version every Prometheus that has a
// receiver accepts (2.33 on, the offline stand-in's 2.42 included): a snappy-compressed
// prometheus.WriteRequest. Its four messages are encoded with protowire rather than by importing
// github.com/prometheus/prometheus/prompb, a module of hundreds of packages for four structs.
type RemoteWriter struct {
	url      string
	registry *prometheus.Registry
	labels   map[string]string
	client   *http.Client
}

// NewRemoteWriter writes registry's families to url with these extra labels on every series.
func NewRemoteWriter(url string, registry *prometheus.Registry, labels map[string]string) *RemoteWriter {
	return &RemoteWriter{url: url, registry: registry, labels: labels, client: &http.Client{Timeout: 5 * time.Second}}
}

// Write sends every sample now, stamped with now.
func (w *RemoteWriter) Write(ctx context.Context, now time.Time) error {
	families, err := w.registry.Gather()
	if err != nil {
		return err
	}
	body := snappy.Encode(nil, encodeWriteRequest(series(families, w.labels), now.UnixMilli()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("remote write to %s: HTTP %d: %s", w.url, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// A sample of one series: its labels (with __name__) sorted by name, as Prometheus requires.
type sample struct {
	labels [][2]string
	value  float64
}

// series flattens families as the text exposition would: a counter (registered with its
// _total), a histogram's cumulative _bucket{le}, _sum and _count.
func series(families []*dto.MetricFamily, extra map[string]string) []sample {
	var out []sample
	for _, family := range families {
		for _, m := range family.GetMetric() {
			base := map[string]string{}
			for k, v := range extra {
				base[k] = v
			}
			for _, pair := range m.GetLabel() {
				base[pair.GetName()] = pair.GetValue()
			}
			add := func(name string, value float64, more ...string) {
				labels := map[string]string{"__name__": name}
				for k, v := range base {
					labels[k] = v
				}
				for i := 0; i+1 < len(more); i += 2 {
					labels[more[i]] = more[i+1]
				}
				out = append(out, sample{labels: sorted(labels), value: value})
			}
			name := family.GetName()
			switch family.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue()) // named with its _total (metrics.go)
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", float64(b.GetCumulativeCount()), "le", formatLe(b.GetUpperBound()))
				}
				add(name+"_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			}
		}
	}
	return out
}

// formatLe writes a bucket bound as client_python and prom-client do (0.005, 1.0 → "1.0"), so
// a bucket has one le value whichever client produced it.
func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if v == math.Trunc(v) && !bytes.ContainsAny([]byte(s), "e.") {
		s += ".0"
	}
	return s
}

func sorted(labels map[string]string) [][2]string {
	out := make([][2]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// encodeWriteRequest is prometheus.WriteRequest{timeseries (1): TimeSeries{labels (1):
// Label{name (1), value (2)}, samples (2): Sample{value (1, double), timestamp (2, int64 ms)}}}.
func encodeWriteRequest(samples []sample, millis int64) []byte {
	var req []byte
	for _, s := range samples {
		var ts []byte
		for _, l := range s.labels {
			var label []byte
			label = protowire.AppendTag(label, 1, protowire.BytesType)
			label = protowire.AppendString(label, l[0])
			label = protowire.AppendTag(label, 2, protowire.BytesType)
			label = protowire.AppendString(label, l[1])
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, label)
		}
		var point []byte
		point = protowire.AppendTag(point, 1, protowire.Fixed64Type)
		point = protowire.AppendFixed64(point, math.Float64bits(s.value))
		point = protowire.AppendTag(point, 2, protowire.VarintType)
		point = protowire.AppendVarint(point, uint64(millis))
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, point)
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, ts)
	}
	return req
}
