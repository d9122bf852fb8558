// Package taptimer shows what a call refused by a grpc InTapHandle leaves behind on the server
// (grpc-go v1.85.0): the stream's context, and the timer of its deadline, live until that
// deadline passes, because the transport does not cancel them on this path. vigil's early
// refusal refuses heartbeats there. Run: go test -v . (its own module, outside vigil's).
package leak

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestTapLeak(t *testing.T) {
	for _, dl := range []time.Duration{0, time.Minute} {
		lis, _ := net.Listen("tcp", "127.0.0.1:0")
		refuse := status.Error(codes.ResourceExhausted, "no")
		s := grpc.NewServer(grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) { return ctx, refuse }))
		healthpb.RegisterHealthServer(s, health.NewServer())
		go s.Serve(lis)
		cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		c := healthpb.NewHealthClient(cc)
		c.Check(context.Background(), &healthpb.HealthCheckRequest{})
		before := heap()
		for i := 0; i < 50000; i++ {
			ctx, cancel := context.Background(), func() {}
			if dl > 0 {
				ctx, cancel = context.WithTimeout(ctx, dl)
			}
			c.Check(ctx, &healthpb.HealthCheckRequest{})
			cancel()
		}
		after := heap()
		t.Logf("deadline %v: heap %d MiB -> %d MiB (%d bytes per refused call)", dl, before>>20, after>>20, int64(after-before)/50000)
		cc.Close()
		s.Stop()
	}
}
