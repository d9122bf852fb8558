package main

import (
	"context"

	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	workerpb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// heartbeatStore keeps each worker's last heartbeat, durably, before the call is answered.
type heartbeatStore interface {
	// Put stores the heartbeats (worker key → marshalled WorkerHeartbeat) and returns once
	// they are committed.
	Put(ctx context.Context, rows []row) error
}

// row is one worker's marshalled heartbeat.
type row struct {
	key  string
	data []byte
}

// server is the part of WorkflowService that an SDK worker's heartbeats use. Every other
// method answers Unimplemented.
type server struct {
	workflowservice.UnimplementedWorkflowServiceServer
	namespace string
	store     heartbeatStore // nil: store nothing
}

// newGRPCServer is a plain gRPC server serving s: the stock options, no interceptor but the
// one that turns a service error into its gRPC status (as Temporal's servers do), so that the
// floor's cost per call is gRPC's own.
func newGRPCServer(s *server) *grpc.Server {
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, serviceerror.ToStatus(err).Err()
		}
		return resp, nil
	}))
	workflowservice.RegisterWorkflowServiceServer(g, s)
	return g
}

func (s *server) checkNamespace(ns string) error {
	if ns != s.namespace {
		return serviceerror.NewNamespaceNotFound(ns)
	}
	return nil
}

// GetSystemInfo answers what an SDK client asks when it connects.
func (s *server) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{
		ServerVersion: "vigil-floor",
		Capabilities:  &workflowservice.GetSystemInfoResponse_Capabilities{SdkMetadata: true},
	}, nil
}

// DescribeNamespace advertises worker heartbeats, as a server that accepts them does: the SDK
// sends them only to a namespace that says so.
func (s *server) DescribeNamespace(_ context.Context, req *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	if err := s.checkNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	return &workflowservice.DescribeNamespaceResponse{
		NamespaceInfo: &namespacepb.NamespaceInfo{
			Name:         s.namespace,
			State:        enumspb.NAMESPACE_STATE_REGISTERED,
			Capabilities: &namespacepb.NamespaceInfo_Capabilities{WorkerHeartbeats: true},
		},
	}, nil
}

// RecordWorkerHeartbeat checks that each heartbeat names its worker and, with a store, writes
// them all before answering.
func (s *server) RecordWorkerHeartbeat(ctx context.Context, req *workflowservice.RecordWorkerHeartbeatRequest) (*workflowservice.RecordWorkerHeartbeatResponse, error) {
	if err := s.checkNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	hbs := req.GetWorkerHeartbeat()
	for _, hb := range hbs {
		if hb.GetWorkerInstanceKey() == "" {
			return nil, serviceerror.NewInvalidArgument("worker_heartbeat.worker_instance_key is required")
		}
	}
	if err := s.put(ctx, hbs...); err != nil {
		return nil, err
	}
	return &workflowservice.RecordWorkerHeartbeatResponse{}, nil
}

// ShutdownWorker stores the worker's last snapshot, as a heartbeat, when the call carries one.
func (s *server) ShutdownWorker(ctx context.Context, req *workflowservice.ShutdownWorkerRequest) (*workflowservice.ShutdownWorkerResponse, error) {
	if err := s.checkNamespace(req.GetNamespace()); err != nil {
		return nil, err
	}
	if req.GetWorkerInstanceKey() == "" {
		return nil, serviceerror.NewInvalidArgument("worker_instance_key is required")
	}
	if hb := req.GetWorkerHeartbeat(); hb != nil {
		hb.WorkerInstanceKey = req.GetWorkerInstanceKey()
		if err := s.put(ctx, hb); err != nil {
			return nil, err
		}
	}
	return &workflowservice.ShutdownWorkerResponse{}, nil
}

// put marshals the heartbeats and stores them; without a store it does nothing, the decoding
// gRPC already did being the floor's whole work.
func (s *server) put(ctx context.Context, hbs ...*workerpb.WorkerHeartbeat) error {
	if s.store == nil || len(hbs) == 0 {
		return nil
	}
	rows := make([]row, len(hbs))
	for i, hb := range hbs {
		data, err := proto.Marshal(hb)
		if err != nil {
			return serviceerror.NewInternalf("marshal heartbeat: %v", err)
		}
		rows[i] = row{key: hb.GetWorkerInstanceKey(), data: data}
	}
	if err := s.store.Put(ctx, rows); err != nil {
		if ctx.Err() != nil {
			return serviceerror.NewDeadlineExceeded(err.Error())
		}
		return serviceerror.NewUnavailablef("store: %v", err)
	}
	return nil
}
