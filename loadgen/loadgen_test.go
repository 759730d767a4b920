package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
)

const contractPath = "../contract/metrics.json"

func contract(t *testing.T) *Contract {
	t.Helper()
	c, err := LoadContract(contractPath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEvenScheduleSpacesCallsByTheRate(t *testing.T) {
	s := NewSchedule(400, false, 1)
	for i := 0; i < 1000; i++ {
		if at, want := s.Next(), time.Duration(i)*2500*time.Microsecond; at != want {
			t.Fatalf("call %d at %v, want %v", i, at, want)
		}
	}
}

func TestPoissonScheduleHasTheRateAndExponentialGaps(t *testing.T) {
	const rate, n = 1000.0, 20000
	s := NewSchedule(rate, true, 7)
	var last time.Duration
	var sum, sumSq float64
	for i := 0; i < n; i++ {
		at := s.Next()
		gap := (at - last).Seconds()
		if gap < 0 {
			t.Fatalf("call %d goes back in time", i)
		}
		sum, sumSq, last = sum+gap, sumSq+gap*gap, at
	}
	mean := sum / n
	cv := math.Sqrt(sumSq/n-mean*mean) / mean
	// An exponential gap's mean is 1/rate and its coefficient of variation 1; even spacing has 0.
	if math.Abs(mean*rate-1) > 0.03 || math.Abs(cv-1) > 0.03 {
		t.Fatalf("mean gap %.3g s (want %.3g), CV %.3f (want 1)", mean, 1/rate, cv)
	}
	again := NewSchedule(rate, true, 7)
	first := NewSchedule(rate, true, 7).Next()
	if again.Next() != first {
		t.Fatal("the same seed gave another schedule")
	}
}

func TestTallyPercentilesAreNearestRank(t *testing.T) {
	var tally Tally
	for i := 100; i >= 1; i-- {
		tally.Add(time.Duration(i) * time.Millisecond)
	}
	got := tally.Millis()
	want := map[string]float64{"mean": 50.5, "p50": 50, "p95": 95, "p99": 99, "max": 100}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if empty := (&Tally{}).Millis(); empty["p99"] != 0 || empty["mean"] != 0 {
		t.Errorf("an empty tally gave %v", empty)
	}
}

// slowCaller answers every call after a fixed delay, counting calls in flight.
type slowCaller struct {
	delay          time.Duration
	inFlight, most atomic.Int64
	calls          atomic.Int64
}

func (c *slowCaller) Call(ctx context.Context) Result {
	c.calls.Add(1)
	n := c.inFlight.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(c.delay)
	c.inFlight.Add(-1)
	return Result{Outcome: "ok", Sent: 10, Received: 20}
}

func (c *slowCaller) Close() {}

func options(mode string, rate float64, workers int, seconds float64) *Options {
	return &Options{Protocol: "rest", Mode: mode, Arrivals: "constant", Rate: rate, Workers: workers, Seconds: seconds, FailOverMs: 0}
}

func TestOpenLoopDropsWhatNoWorkerCanStartAndNeverWaits(t *testing.T) {
	// 2 workers, 50 ms per call: at most 40 calls/s can start; 200 calls/s are offered.
	caller := &slowCaller{delay: 50 * time.Millisecond}
	s := Drive(context.Background(), caller, NewInstruments(contract(t), "rest", "x"), nil, options("open", 200, 2, 1))
	if s.Scheduled != 200 || s.Started+s.Dropped != s.Scheduled {
		t.Fatalf("scheduled %d, started %d, dropped %d", s.Scheduled, s.Started, s.Dropped)
	}
	if s.Started > 45 || s.Started < 20 || caller.most.Load() > 2 {
		t.Fatalf("started %d (want about 40), %d in flight at most", s.Started, caller.most.Load())
	}
	if s.Answered != s.Started || int(caller.calls.Load()) != s.Started {
		t.Fatalf("answered %d of %d started (%d calls made)", s.Answered, s.Started, caller.calls.Load())
	}
	if s.LatencyMs["p50"] < 50 {
		t.Fatalf("median %v ms, below the 50 ms each call takes", s.LatencyMs["p50"])
	}
}

func TestOpenLoopKeepsItsScheduleWhenCallsAreAnswered(t *testing.T) {
	caller := &slowCaller{delay: time.Millisecond}
	s := Drive(context.Background(), caller, NewInstruments(contract(t), "rest", "x"), nil, options("open", 500, 8, 1))
	if s.Scheduled != 500 || s.Dropped != 0 || s.Answered != 500 || s.Failed != 0 || s.Seconds != 1 {
		t.Fatalf("%+v", s)
	}
	if s.StartLagMs["p50"] > 1 {
		t.Fatalf("calls started %.3f ms late at the median", s.StartLagMs["p50"])
	}
}

func TestTheWindowCountsOnlyTheCallsIntendedInsideIt(t *testing.T) {
	// 2 workers, 50 ms per call, 200 calls/s offered for 1 s: drops all along the run; the
	// window is its second half, as the runner leaves a warm-up out.
	caller := &slowCaller{delay: 50 * time.Millisecond}
	o := options("open", 200, 2, 1)
	o.WindowFrom, o.WindowTo = 0.5, 1
	s := Drive(context.Background(), caller, NewInstruments(contract(t), "rest", "x"), nil, o)
	w := s.Window
	if w == nil || w.FromS != 0.5 || w.ToS != 1 || w.Scheduled != 100 {
		t.Fatalf("window %+v of %d scheduled", w, s.Scheduled)
	}
	if w.Dropped < 60 || w.Dropped > w.Scheduled || s.Dropped-w.Dropped < 60 {
		t.Fatalf("dropped %d in the window, %d in all (want about 80 and 160)", w.Dropped, s.Dropped)
	}
	if _, ok := w.StartLagMs["p99"]; !ok {
		t.Fatalf("no start lag for the window: %+v", w)
	}
	// Without a window (a closed loop, or none asked for) the summary has none.
	if s := Drive(context.Background(), caller, NewInstruments(contract(t), "rest", "x"), nil, options("open", 20, 2, 0.2)); s.Window != nil {
		t.Fatalf("a window nobody asked for: %+v", s.Window)
	}
}

func TestClosedLoopKeepsEachUserBusyAndCountsLateAnswers(t *testing.T) {
	caller := &slowCaller{delay: 20 * time.Millisecond}
	o := options("closed", 0, 3, 0.5)
	o.FailOverMs = 10
	s := Drive(context.Background(), caller, NewInstruments(contract(t), "rest", "x"), nil, o)
	if caller.most.Load() != 3 || s.Answered < 45 || s.Answered > 78 {
		t.Fatalf("%d answered with %d in flight at most", s.Answered, caller.most.Load())
	}
	if s.Late != s.Answered || s.Failed != 0 || s.OfferedPerS != 0 {
		t.Fatalf("late %d failed %d of %d", s.Late, s.Failed, s.Answered)
	}
}

func TestBadOptionsAreRefusedWithTheirReason(t *testing.T) {
	base := []string{"-protocol", "rest", "-target", "http://127.0.0.1:1", "-contract", contractPath, "-rate", "10", "-body", "{}"}
	if _, err := parse(base); err != nil {
		t.Fatalf("good options refused: %v", err)
	}
	for flag, want := range map[string]string{
		"-protocol=soap":  "-protocol",
		"-rate=0":         "-rate",
		"-workers=0":      "-workers",
		"-seconds=-1":     "-seconds",
		"-mode=sideways":  "-mode",
		"-arrivals=burst": "-arrivals",
		"-body={":         "-body",
		"-target=1.2.3.4": "-target",
		"-http=3":         "-http",
		"-window-to=11":   "-window-to",
		"-window-from=-1": "-window-from",
	} {
		if _, err := parse(append(append([]string{}, base...), flag)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", flag, err)
		}
	}
	if _, err := parse(append(append([]string{}, base...), "-window-from=2", "-window-to=1")); err == nil {
		t.Error("a window ending before it starts accepted")
	}
	if _, err := parse([]string{"-protocol", "grpc", "-target", "h:1", "-contract", "x", "-rate", "1", "-body", "{}"}); err == nil {
		t.Error("grpc without -proto accepted")
	}
}

func TestOutcomesAreTheContractsOnBothProtocols(t *testing.T) {
	for status, want := range map[int]string{200: "ok", 400: "client_error", 413: "client_error", 503: "client_error", 499: "cancelled", 504: "timeout", 500: "server_error"} {
		if got := httpOutcome(status); got != want {
			t.Errorf("HTTP %d: %s, want %s", status, got, want)
		}
	}
	errs := contract(t).ClientErrors()
	for code, want := range map[codes.Code]string{
		codes.OK: "ok", codes.InvalidArgument: "client_error", codes.ResourceExhausted: "client_error",
		codes.Unavailable: "connection_error", codes.DeadlineExceeded: "timeout", codes.Canceled: "cancelled",
		codes.Internal: "server_error",
	} {
		if got := grpcOutcome(code, errs); got != want {
			t.Errorf("%v: %s, want %s", code, got, want)
		}
	}
}

func TestRESTCallerNamesEachAnswer(t *testing.T) {
	var status atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != orderPath || r.Header.Get("Content-Type") != "application/json" || string(body) != `{"a": 1}` {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte("ok!"))
	}))
	defer server.Close()
	caller := newREST(server.URL, []byte(`{"a": 1}`), 2, false)
	defer caller.Close()
	for code, want := range map[int64]string{200: "ok", 400: "client_error", 500: "server_error"} {
		status.Store(code)
		if got := caller.Call(context.Background()); got.Outcome != want || got.Sent != 8 || got.Received != 3 {
			t.Errorf("HTTP %d: %+v, want %s", code, got, want)
		}
	}
	server.Close()
	if got := caller.Call(context.Background()).Outcome; got != "connection_error" {
		t.Errorf("a closed server: %s", got)
	}
}

func TestH2CCallsArriveAsHTTP2WithPriorKnowledge(t *testing.T) {
	var protos sync.Map
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
	}))
	server.Config.Protocols = new(http.Protocols)
	server.Config.Protocols.SetHTTP1(true)
	server.Config.Protocols.SetUnencryptedHTTP2(true)
	server.Start()
	defer server.Close()
	for _, h2c := range []bool{false, true} {
		caller := newREST(server.URL, []byte(`{}`), 1, h2c)
		if got := caller.Call(context.Background()).Outcome; got != "ok" {
			t.Fatalf("h2c %v: %s", h2c, got)
		}
		caller.Close()
	}
	_, h1 := protos.Load("HTTP/1.1")
	_, h2 := protos.Load("HTTP/2.0")
	if !h1 || !h2 {
		t.Fatalf("HTTP/1.1 seen %v, HTTP/2.0 seen %v", h1, h2)
	}
}

func TestRemoteWriteSendsTheContractSeriesWithTheGeneratorLabel(t *testing.T) {
	var got [][2]string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		compressed, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, compressed)
		if err != nil || r.Header.Get("Content-Encoding") != "snappy" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got = decodeSeries(t, raw)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	metrics := NewInstruments(contract(t), "grpc", "grpc")
	metrics.Record(Result{Outcome: "ok", Sent: 100, Received: 50}, 0.0007)
	metrics.Record(Result{Outcome: "ok", Sent: 100, Received: 50}, 0.003)
	metrics.Record(Result{Outcome: "server_error", Sent: 100}, 0.02)
	writer := NewRemoteWriter(receiver.URL, metrics.Registry, map[string]string{"generator": "loadgen", "job": "loadgen"})
	if err := writer.Write(context.Background(), time.UnixMilli(1700000000000)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`wirelab_client_requests_total{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,outcome=ok,peer=grpc,protocol=grpc} 2`,
		`wirelab_client_requests_total{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,outcome=timeout,peer=grpc,protocol=grpc} 0`,
		`wirelab_client_request_duration_seconds_bucket{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,le=0.00075,peer=grpc,protocol=grpc} 1`,
		`wirelab_client_request_duration_seconds_bucket{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,le=1.0,peer=grpc,protocol=grpc} 3`,
		`wirelab_client_request_duration_seconds_bucket{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,le=+Inf,peer=grpc,protocol=grpc} 3`,
		`wirelab_client_request_duration_seconds_count{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,peer=grpc,protocol=grpc} 3`,
	}
	lines := map[string]bool{}
	for _, s := range got {
		lines[s[0]+" "+s[1]] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("missing %s", w)
		}
	}
	for _, w := range []string{
		`wirelab_client_request_bytes_sum{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,peer=grpc,protocol=grpc} 300`,
		`wirelab_client_response_bytes_bucket{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,le=64.0,peer=grpc,protocol=grpc} 3`,
		`wirelab_client_messages_received_total{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,peer=grpc,protocol=grpc} 2`,
		`wirelab_client_messages_sent_total{call=ProcessOrder,generator=loadgen,job=loadgen,kind=unary,peer=grpc,protocol=grpc} 3`,
		`wirelab_client_users{generator=loadgen,job=loadgen} 0`,
	} {
		if !lines[w] {
			t.Errorf("missing %s", w)
		}
	}
	// Every outcome at zero; the duration's buckets plus +Inf, _sum and _count; the two size
	// histograms' likewise; two message counters, the users and CPU gauges.
	c := contract(t)
	if want := len(c.AllOutcomes()) + len(c.Buckets.Duration) + 3 + 2*(len(c.Buckets.Size)+3) + 4; len(got) != want {
		t.Errorf("%d series, want %d", len(got), want)
	}
}

// decodeSeries reads a WriteRequest back as "name{label=value,...}" and the value (at the one
// timestamp written), so the test checks the wire format, not the encoder against itself.
func decodeSeries(t *testing.T, raw []byte) [][2]string {
	var out [][2]string
	each := func(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64)) {
		for len(b) > 0 {
			num, typ, k := protowire.ConsumeTag(b)
			b = b[k:]
			switch typ {
			case protowire.BytesType:
				v, k := protowire.ConsumeBytes(b)
				f(num, typ, v, 0)
				b = b[k:]
			case protowire.Fixed64Type:
				v, k := protowire.ConsumeFixed64(b)
				f(num, typ, nil, v)
				b = b[k:]
			case protowire.VarintType:
				v, k := protowire.ConsumeVarint(b)
				f(num, typ, nil, v)
				b = b[k:]
			default:
				t.Fatalf("unexpected wire type %v", typ)
			}
		}
	}
	each(raw, func(_ protowire.Number, _ protowire.Type, ts []byte, _ uint64) {
		var name string
		var labels []string
		var value float64
		each(ts, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
			if num == 1 {
				var pair [2]string
				each(v, func(n protowire.Number, _ protowire.Type, s []byte, _ uint64) { pair[n-1] = string(s) })
				if pair[0] == "__name__" {
					name = pair[1]
				} else {
					labels = append(labels, pair[0]+"="+pair[1])
				}
				return
			}
			each(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) {
				if n == 1 {
					value = math.Float64frombits(x)
				} else if x != 1700000000000 {
					t.Errorf("timestamp %d", x)
				}
			})
		})
		out = append(out, [2]string{name + "{" + strings.Join(labels, ",") + "}", strconv.FormatFloat(value, 'g', -1, 64)})
	})
	return out
}

func TestThePageHasTheContractsSampleNamesAsLocustsPageHas(t *testing.T) {
	metrics := NewInstruments(contract(t), "rest", "rest")
	metrics.Record(Result{Outcome: "ok", Sent: 10, Received: 20}, 0.001)
	server := httptest.NewServer(promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	defer server.Close()
	resp, err := http.Get(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{
		"wirelab_client_requests_total{", "wirelab_client_messages_sent_total{",
		"wirelab_client_messages_received_total{", "wirelab_client_request_duration_seconds_bucket{",
		"wirelab_client_request_bytes_sum{", "wirelab_client_response_bytes_count{",
		"wirelab_client_users 0", `wirelab_client_cpu_usage_ratio{instance_name="loadgen"}`,
	} {
		if !strings.Contains(string(page), "\n"+name) {
			t.Errorf("no %s on the page", name)
		}
	}
	if strings.Contains(string(page), "_total_total") {
		t.Error("a counter named _total twice")
	}
}
