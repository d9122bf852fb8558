package main

import (
	"context"
	"database/sql"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	workerpb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// dial serves s on a loopback port and returns a client of it.
func dial(t *testing.T, s *server) workflowservice.WorkflowServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newGRPCServer(s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return workflowservice.NewWorkflowServiceClient(conn)
}

func heartbeatRequest(keys ...string) *workflowservice.RecordWorkerHeartbeatRequest {
	req := &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default", Identity: "test"}
	for _, k := range keys {
		req.WorkerHeartbeat = append(req.WorkerHeartbeat, &workerpb.WorkerHeartbeat{WorkerInstanceKey: k, TaskQueue: "tq-" + k})
	}
	return req
}

func TestWithoutAStoreEveryHeartbeatIsAnswered(t *testing.T) {
	c := dial(t, &server{namespace: "default"})
	ctx := context.Background()
	ns, err := c.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if !ns.GetNamespaceInfo().GetCapabilities().GetWorkerHeartbeats() {
		t.Error("the namespace does not advertise worker heartbeats: the SDK would send none")
	}
	if _, err := c.RecordWorkerHeartbeat(ctx, heartbeatRequest("w1", "w2")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "w1"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.RecordWorkerHeartbeat(ctx, heartbeatRequest(""))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a heartbeat without a worker key: %v, want InvalidArgument", err)
	}
	_, err = c.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "other"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("another namespace: %v, want NotFound", err)
	}
}

// With the SQLite store a heartbeat is answered once its worker's row is committed, and the
// last heartbeat of a worker is the one kept: upserted, or appended to the log and folded at
// every commit, or only when the store closes.
func TestSQLiteStoreKeepsEachWorkersLastHeartbeat(t *testing.T) {
	for name, foldEvery := range map[string]time.Duration{"upsert": 0, "log folded at every commit": time.Nanosecond, "log folded at close": time.Hour} {
		t.Run(name, func(t *testing.T) { testSQLiteStoreKeepsEachWorkersLastHeartbeat(t, foldEvery) })
	}
}

func testSQLiteStoreKeepsEachWorkersLastHeartbeat(t *testing.T, foldEvery time.Duration) {
	path := filepath.Join(t.TempDir(), "floor.db")
	store, err := openSQLite(path, 5*time.Millisecond, foldEvery)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, &server{namespace: "default", store: store})
	ctx := context.Background()

	// Concurrent callers share batches; every one is answered after its commit.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			req := heartbeatRequest("w1", "w2")
			req.WorkerHeartbeat[0].SdkVersion = string(rune('a' + i%26))
			_, err := c.RecordWorkerHeartbeat(ctx, req)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	final := heartbeatRequest("w1")
	final.WorkerHeartbeat[0].SdkVersion = "last"
	if _, err := c.RecordWorkerHeartbeat(ctx, final); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM worker_heartbeats").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d rows, want one per worker (2)", n)
	}
	var data []byte
	if err := db.QueryRow("SELECT heartbeat FROM worker_heartbeats WHERE worker_key = 'w1'").Scan(&data); err != nil {
		t.Fatal(err)
	}
	var hb workerpb.WorkerHeartbeat
	if err := proto.Unmarshal(data, &hb); err != nil {
		t.Fatal(err)
	}
	if hb.GetSdkVersion() != "last" || hb.GetTaskQueue() != "tq-w1" {
		t.Errorf("stored %v, want the last heartbeat of w1", &hb)
	}
	if foldEvery > 0 {
		if err := db.QueryRow("SELECT count(*) FROM heartbeat_log").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows left in the log after close, want 0", n)
		}
	}
}

func TestOnlyLoopbackIsServed(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:1": true, "localhost:1": true, "[::1]:1": true, "0.0.0.0:1": false, "10.0.0.1:1": false, "nohost": false} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v", addr, err)
		}
	}
}
