package history

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigilhq/vigil/chasm"
)

// LocalConn is a grpc.ClientConnInterface that calls the services registered on it directly,
// in process. The Router uses it for shards this process owns: a heartbeat then skips the wire
// encoding, HTTP/2 framing and the loopback socket. Requests and replies are still copied
// (unless the call passes chasm.ByReference), and errors still travel as statuses, so caller
// and handler see exactly what they would see over the network.
type LocalConn struct {
	mu       sync.RWMutex
	services map[string]*localService
}

type localService struct {
	impl    any
	methods map[string]grpc.MethodDesc
}

var (
	_ grpc.ClientConnInterface = (*LocalConn)(nil)
	_ grpc.ServiceRegistrar    = (*LocalConn)(nil)
)

// NewLocalConn returns a LocalConn with no services.
func NewLocalConn() *LocalConn {
	return &LocalConn{services: make(map[string]*localService)}
}

// RegisterService implements grpc.ServiceRegistrar: a ServiceRegistration registers on a
// LocalConn exactly as on a grpc.Server.
func (c *LocalConn) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s := &localService{impl: impl, methods: make(map[string]grpc.MethodDesc, len(desc.Methods))}
	for _, m := range desc.Methods {
		s.methods[m.MethodName] = m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services[desc.ServiceName] = s
}

// Invoke implements grpc.ClientConnInterface for unary calls.
func (c *LocalConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	serviceName, methodName, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return localError(codes.Internal, "malformed method name %q", method)
	}
	c.mu.RLock()
	s, ok := c.services[serviceName]
	c.mu.RUnlock()
	if !ok {
		return localError(codes.Unimplemented, "unknown service %s", serviceName)
	}
	m, ok := s.methods[methodName]
	if !ok {
		return localError(codes.Unimplemented, "unknown method %s for service %s", methodName, serviceName)
	}
	in, ok := args.(proto.Message)
	if !ok {
		return localError(codes.Internal, "request %T is not a protobuf message", args)
	}
	copyMessage := proto.Merge
	if slices.ContainsFunc(opts, isByReference) {
		copyMessage = shareFields
	}
	resp, err := m.Handler(s.impl, ctx, func(v any) error {
		msg, ok := v.(proto.Message)
		if !ok {
			return fmt.Errorf("request holder %T is not a protobuf message", v)
		}
		copyMessage(msg, in)
		return nil
	}, nil)
	if err != nil {
		// Through a status and back, as over the wire: the caller gets the same error types.
		return serviceerror.FromStatus(serviceerror.ToStatus(err))
	}
	out, ok := reply.(proto.Message)
	if !ok {
		return localError(codes.Internal, "reply %T is not a protobuf message", reply)
	}
	proto.Reset(out)
	copyMessage(out, resp.(proto.Message))
	return nil
}

func isByReference(o grpc.CallOption) bool {
	_, ok := o.(chasm.ByReferenceOption)
	return ok
}

// shareFields sets each populated field of dst to src's value of it, sharing (not copying)
// the lists, maps and messages src holds: a chasm.ByReference call hands messages over this
// way, because the generated code gives the handler (and the caller) a message of its own to
// fill. dst must be empty and of src's type.
func shareFields(dst, src proto.Message) {
	d := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
}

// NewStream implements grpc.ClientConnInterface; history serves no streams.
func (c *LocalConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streams are not served in process")
}

// localError is what the router's gRPC client would return for the same status.
func localError(code codes.Code, format string, args ...any) error {
	return serviceerror.FromStatus(status.Newf(code, format, args...))
}
