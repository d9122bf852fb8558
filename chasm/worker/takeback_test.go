package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/history"
)

// heldAdmitter holds every call until its context ends, as the host's admission does while the
// store does not answer, and then answers as the admission does for a caller gone.
type heldAdmitter struct{ entered chan struct{} }

func (a heldAdmitter) Admit(ctx context.Context, _ int32, _ overload.Class, _ int) (func(), error) {
	select {
	case a.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, serviceerror.NewCanceled("the caller went away before history served the call")
}

// fencingMembership names one owner for every shard and says which hosts are lapsing; the
// test fences this host and names another owner, as a host's own membership does once its
// renewals fail (PostgreSQL restarting).
type fencingMembership struct {
	mu      sync.Mutex
	owner   string
	lapsing map[string]bool
}

func (m *fencingMembership) HostForShard(int32) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner, nil
}

func (m *fencingMembership) Lapsing(address string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lapsing[address]
}

func (m *fencingMembership) fence(self, next string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lapsing[self], m.owner = true, next
}

// nextOwner answers every heartbeat.
type nextOwner struct {
	workerpb.UnimplementedWorkerHistoryServiceServer
}

func (nextOwner) RecordHeartbeats(_ context.Context, req *workerpb.RecordHeartbeatsRequest) (*workerpb.RecordHeartbeatsResponse, error) {
	resp := &workerpb.RecordHeartbeatsResponse{}
	for range req.GetHeartbeats() {
		resp.Results = append(resp.Results, &workerpb.HeartbeatResult{ConflictToken: 42})
	}
	return resp, nil
}

// A host fenced by its own membership (its renewals fail while PostgreSQL restarts) takes back
// the heartbeat calls it serves for its own shards once the membership names another owner: the
// router cancels them in process. The canceled heartbeats must not come back to the SDK as
// Canceled inside a successful reply (no SDK retries Canceled): the call fails Unavailable as a
// whole, and the router resends it to the next owner, whose answer the caller gets.
func TestHeartbeatTakenBackFromAFencedHostIsResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admitter := heldAdmitter{entered: make(chan struct{}, 1)}
	handler := worker.NewHandler(b.engine, b.config, b.engine.Clock(), tally.NoopScope, zap.NewNop(), worker.WithAdmission(admitter))
	local := history.NewLocalConn()
	workerpb.RegisterWorkerHistoryServiceServer(local, handler)

	next, err := history.NewServer("127.0.0.1:0", []history.ServiceRegistration{func(r grpc.ServiceRegistrar) {
		workerpb.RegisterWorkerHistoryServiceServer(r, nextOwner{})
	}}, zap.NewNop())
	require.NoError(t, err)
	next.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		next.Stop(ctx)
	})

	const self = "self"
	membership := &fencingMembership{owner: self, lapsing: map[string]bool{}}
	router := history.NewRouter(testNumShards, membership, history.WithLocalConn(local, func() string { return self }))
	t.Cleanup(func() { _ = router.Close() })
	conn, err := router.ConnForShard(1)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type answer struct {
		resp *workerpb.RecordHeartbeatsResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := workerpb.NewWorkerHistoryServiceClient(conn).RecordHeartbeats(ctx, &workerpb.RecordHeartbeatsRequest{
			NamespaceId: testNamespaceID, Namespace: testNamespace, ShardId: 1,
			Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat("w1")}, {Heartbeat: heartbeat("w2")}},
		}, chasm.ByReference, chasm.Resendable)
		done <- answer{resp, err}
	}()
	<-admitter.entered // the call is held on this host
	membership.fence(self, next.Address())

	got := <-done
	require.NoError(t, got.err)
	require.NoError(t, ctx.Err(), "answered within the caller's deadline")
	require.Len(t, got.resp.GetResults(), 2)
	for _, r := range got.resp.GetResults() {
		require.Nil(t, r.GetError(), "a heartbeat came back failed: %v", r.GetError())
		require.EqualValues(t, 42, r.GetConflictToken(), "answered by the next owner")
	}
}
