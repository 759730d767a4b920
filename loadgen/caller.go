package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The contract's small order call on each protocol (proto/wirelab/v1/wirelab.proto).
const (
	orderMethod = "/wirelab.v1.WireLab/ProcessOrder"
	orderPath   = "/v1/orders"
	protoFile   = "wirelab/v1/wirelab.proto"
)

// Caller sends one order and names its outcome in the contract's vocabulary (metrics.json:
// outcomes and client_only_outcomes), as the Python and Node.js clients name theirs.
type Caller interface {
	Call(ctx context.Context) Result
	Close()
}

// Result is one call's outcome and the body bytes it sent and received: the HTTP body, or the
// protobuf message, as the other clients count wirelab_client_request_bytes.
type Result struct {
	Outcome        string
	Sent, Received int
}

// restCaller posts the order's JSON body. Over HTTP/1.1 (the default) on keep-alive connections,
// one per call in flight, as many as the run has workers, so no call waits for another's
// connection; with h2c, over cleartext HTTP/2 with prior knowledge (the REST service's
// WIRELAB_REST_HTTP=2, docs/http2.md), its calls multiplexed as streams on shared connections,
// as gRPC's are.
type restCaller struct {
	client *http.Client
	url    string
	body   []byte
}

func newREST(target string, body []byte, workers int, h2c bool) *restCaller {
	transport := &http.Transport{
		MaxIdleConns:        workers,
		MaxIdleConnsPerHost: workers,
		DisableCompression:  true,
	}
	if h2c {
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
	}
	return &restCaller{client: &http.Client{Transport: transport}, url: target + orderPath, body: body}
}

func (c *restCaller) Call(ctx context.Context) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return Result{Outcome: "failure"}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return Result{Outcome: transportOutcome(ctx), Sent: len(c.body)}
	}
	// The whole body is read: the call lasts to its last byte, and the connection is reused.
	received, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return Result{Outcome: transportOutcome(ctx), Sent: len(c.body), Received: int(received)}
	}
	return Result{Outcome: httpOutcome(resp.StatusCode), Sent: len(c.body), Received: int(received)}
}

// transportOutcome names a call that got no answer: past its deadline, or the connection failed.
func transportOutcome(ctx context.Context) string {
	if ctx.Err() != nil {
		return "timeout"
	}
	return "connection_error"
}

// httpOutcome maps a status as wirelab.contract.http_outcome does (a 503 is a refusal for load,
// counted as gRPC's RESOURCE_EXHAUSTED is).
func httpOutcome(status int) string {
	switch {
	case status < 400:
		return "ok"
	case status == 499:
		return "cancelled"
	case status == 408 || status == 504:
		return "timeout"
	case status < 500 || status == 503:
		return "client_error"
	}
	return "server_error"
}

func (c *restCaller) Close() { c.client.CloseIdleConnections() }

// grpcCaller invokes ProcessOrder on connections shared round-robin by the workers, with the
// request built from the same JSON as REST's body (proto JSON names are the REST body's) against
// the contract's .proto compiled at start-up, so no generated code can drift from it.
type grpcCaller struct {
	conns   []*grpc.ClientConn
	request proto.Message
	reply   protoreflect.MessageDescriptor
	calls   atomic.Uint64
	size    int // the request's protobuf bytes
	// The codes metrics.json counts as the caller's fault (grpc_client_error_codes).
	clientErrors map[string]bool
}

func newGRPC(target string, body []byte, protoRoot string, connections int, clientErrors map[string]bool) (*grpcCaller, error) {
	method, err := orderDescriptor(protoRoot)
	if err != nil {
		return nil, err
	}
	request := dynamicpb.NewMessage(method.Input())
	if err := protojson.Unmarshal(body, request); err != nil {
		return nil, fmt.Errorf("the body is not an %s: %w", method.Input().FullName(), err)
	}
	c := &grpcCaller{request: request, reply: method.Output(), clientErrors: clientErrors, size: proto.Size(request)}
	for i := 0; i < connections; i++ {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, conn)
	}
	return c, nil
}

func orderDescriptor(protoRoot string) (protoreflect.MethodDescriptor, error) {
	if _, err := os.Stat(filepath.Join(protoRoot, protoFile)); err != nil {
		return nil, fmt.Errorf("-proto %s: %w", protoRoot, err)
	}
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protoRoot}}),
	}
	files, err := compiler.Compile(context.Background(), protoFile)
	if err != nil {
		return nil, err
	}
	service := files[0].Services().ByName("WireLab")
	if service == nil {
		return nil, fmt.Errorf("%s has no service WireLab", protoFile)
	}
	method := service.Methods().ByName("ProcessOrder")
	if method == nil {
		return nil, fmt.Errorf("%s has no WireLab.ProcessOrder", protoFile)
	}
	return method, nil
}

func (c *grpcCaller) Call(ctx context.Context) Result {
	conn := c.conns[(c.calls.Add(1)-1)%uint64(len(c.conns))]
	reply := dynamicpb.NewMessage(c.reply)
	err := conn.Invoke(ctx, orderMethod, c.request, reply)
	r := Result{Outcome: grpcOutcome(status.Code(err), c.clientErrors), Sent: c.size}
	if err == nil {
		r.Received = proto.Size(reply)
	}
	return r
}

// grpcOutcome maps a status as wirelab.contract.grpc_outcome does; UNAVAILABLE, the status of a
// connection that failed, is the client-only connection_error, as in the Locust client.
func grpcOutcome(code codes.Code, clientErrors map[string]bool) string {
	switch {
	case code == codes.OK:
		return "ok"
	case code == codes.Unavailable:
		return "connection_error"
	case code == codes.Canceled:
		return "cancelled"
	case code == codes.DeadlineExceeded:
		return "timeout"
	case clientErrors[grpcName(code)]:
		return "client_error"
	}
	return "server_error"
}

// grpcName is a code's canonical upper-case name (INVALID_ARGUMENT), as metrics.json lists them.
func grpcName(code codes.Code) string {
	return strings.ToUpper(strings.Join(camelWords.FindAllString(code.String(), -1), "_"))
}

var camelWords = regexp.MustCompile(`[A-Z][a-z]*`)

func (c *grpcCaller) Close() {
	for _, conn := range c.conns {
		conn.Close()
	}
}

// callTimeout bounds one call, so a hung service ends a run instead of stalling it.
const callTimeout = 30 * time.Second
