package history

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/vigilhq/vigil/common/admission"
)

// patienceHeader carries admission.WithPatience from the frontend that took a call to the
// history host that owns its shard, when that is another host of the cluster: a context value
// does not cross gRPC. Without it, the Go SDK's heartbeats forwarded to another host were
// refused there past history.admissionMaxQueueDelay, to come back as retries. Only hosts of
// the cluster reach this port (the cluster secret), and patience only lets a call wait within
// its own deadline.
const patienceHeader = "vigil-patient"

// patienceClientInterceptor sends a patient call's mark along to the host it is forwarded to.
func patienceClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if admission.Patient(ctx) {
		ctx = metadata.AppendToOutgoingContext(ctx, patienceHeader, "1")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// patienceServerInterceptor marks a call forwarded as patient (patienceClientInterceptor) so
// that this host's admission lets it wait.
func patienceServerInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(patienceHeader)) > 0 {
		ctx = admission.WithPatience(ctx)
	}
	return handler(ctx, req)
}
