// Command worker is the stock-SDK worker process of the chaos suite (tests/chaos): the suite
// builds it, starts several, SIGKILLs and SIGSTOPs them. It runs the activity "chaos", which
// holds for the time its input asks and returns a result naming its input and this worker, and
// it records durably, in its events file, every activity it starts and every answer the server
// gives to its completions, so that the suite can check who finished what.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/vigilhq/vigil/tests/chaos"
)

type recorder struct {
	mu     sync.Mutex
	f      *os.File
	tokens map[string]string // task token → "activityID attempt"
}

// record appends one line and syncs it, so that it survives a SIGKILL right after.
func (r *recorder) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = fmt.Fprintf(r.f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	_ = r.f.Sync()
}

func (r *recorder) activityOf(token []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.tokens[string(token)]; ok {
		return a
	}
	return "unknown 0"
}

// intercept records the server's answer to each try of a completion, failure or cancellation.
func (r *recorder) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var token []byte
	switch m := req.(type) {
	case *workflowservice.RespondActivityTaskCompletedRequest:
		token = m.GetTaskToken()
	case *workflowservice.RespondActivityTaskFailedRequest:
		token = m.GetTaskToken()
	case *workflowservice.RespondActivityTaskCanceledRequest:
		token = m.GetTaskToken()
	default:
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	op := method[strings.LastIndex(method, "/")+1:]
	switch {
	case err == nil:
		r.record("respond-ok %s %s", r.activityOf(token), op)
	default:
		s := status.Convert(err)
		kind := "respond-error"
		if strings.Contains(s.Message(), "no longer current") {
			kind = "respond-refused"
		}
		r.record("%s %s %s %s %q", kind, r.activityOf(token), op, s.Code(), s.Message())
	}
	return err
}

func main() {
	address := flag.String("address", "127.0.0.1:7233", "vigil's gRPC address")
	queue := flag.String("queue", "chaos", "task queue")
	name := flag.String("name", "", "worker identity")
	events := flag.String("events", "", "events file")
	flag.Parse()
	f, err := os.OpenFile(*events, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	rec := &recorder{f: f, tokens: map[string]string{}}
	var c client.Client
	for { // the server may be restarting
		c, err = client.Dial(client.Options{
			HostPort: *address, Identity: *name, WorkerHeartbeatInterval: time.Second, Logger: quietLogger{},
			ConnectionOptions: client.ConnectionOptions{
				DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rec.intercept)},
			},
		})
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	w := sdkworker.New(c, *queue, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(ctx context.Context, in chaos.Input) (string, error) {
		info := activity.GetInfo(ctx)
		rec.mu.Lock()
		rec.tokens[string(info.TaskToken)] = fmt.Sprintf("%s %d", in.ID, info.Attempt)
		rec.mu.Unlock()
		rec.record("started %s %d", in.ID, info.Attempt)
		select {
		case <-time.After(time.Duration(in.HoldMs) * time.Millisecond):
			rec.record("finished %s %d", in.ID, info.Attempt)
			return chaos.Result(in.ID, in.Nonce, *name), nil
		case <-ctx.Done():
			rec.record("cancelled %s %d", in.ID, info.Attempt)
			return "", ctx.Err()
		}
	}, activity.RegisterOptions{Name: "chaos"})
	for w.Start() != nil {
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("worker started")
	select {}
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
