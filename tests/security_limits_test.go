package tests

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

func limitsCluster(t *testing.T, dc map[dynamicconfig.Key]any) (*testcluster.Cluster, func(key string) *grpc.ClientConn) {
	cluster := testcluster.New(t, testcluster.Options{
		Namespaces: []string{"other"}, DynamicConfig: dc,
		Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey},
	})
	return cluster, func(key string) *grpc.ClientConn {
		c, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(key))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// TestSecurity_RegistrationStorm: a storm of new worker keys in one namespace is held to
// worker.registrationRPS; known workers keep heartbeating, and another namespace registers
// as usual.
func TestSecurity_RegistrationStorm(t *testing.T) {
	const rps = 20
	_, dial := limitsCluster(t, map[dynamicconfig.Key]any{
		dynamicconfig.WorkerRegistrationRPS.Key():   rps,
		dynamicconfig.WorkerRegistrationBurst.Key(): 0, // one second's worth: a storm, not a deploy
		dynamicconfig.NamespaceRPS.Key():            0, // the storm must meet the registration limit, not this one
	})
	wf := workflowservice.NewWorkflowServiceClient(dial(testAdminKey))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	beat := func(ns, key string) error {
		_, err := wf.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: ns,
			WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: key, TaskQueue: "q"}}})
		return err
	}
	require.NoError(t, beat("default", "known"))

	start := time.Now()
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				err := beat("default", fmt.Sprintf("storm-%d-%d", g, i))
				switch status.Code(err) {
				case codes.OK:
					accepted.Add(1)
				case codes.ResourceExhausted:
					refused.Add(1)
					assert.Contains(t, status.Convert(err).Message(), "worker.registrationRPS")
				default:
					assert.NoError(t, err)
				}
			}
		}()
	}
	// Meanwhile: the known worker, and new workers of another namespace, are not limited.
	require.NoError(t, beat("default", "known"))
	for i := range rps / 2 {
		require.NoError(t, beat("other", fmt.Sprintf("calm-%d", i)))
	}
	wg.Wait()
	elapsed := time.Since(start)

	// A token bucket of rate rps and burst rps can never have let more through than this.
	bound := int64(rps + float64(rps)*elapsed.Seconds() + 1)
	require.LessOrEqual(t, accepted.Load(), bound, "accepted %d in %v", accepted.Load(), elapsed)
	require.Positive(t, refused.Load())
	t.Logf("storm: %d accepted, %d refused in %v (bound %d)", accepted.Load(), refused.Load(), elapsed, bound)
}

// TestSecurity_NamespaceRPSSparesHeartbeats: a namespace over frontend.namespaceRPS has its
// other calls refused, but its workers' heartbeats, on both APIs, are still recorded: refused
// by a rate limit while the host has room, a live worker would lose its lease.
func TestSecurity_NamespaceRPSSparesHeartbeats(t *testing.T) {
	_, dial := limitsCluster(t, map[dynamicconfig.Key]any{dynamicconfig.NamespaceRPS.Key(): 1})
	conn := dial(testAdminKey)
	wf := workflowservice.NewWorkflowServiceClient(conn)
	live := livenesspb.NewWorkerLivenessServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// One request a second: the bucket is empty after the first of these.
	var err error
	for range 100 {
		if _, err = live.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default"}); err != nil {
			break
		}
	}
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "frontend.namespaceRPS")

	for round := range 3 {
		for i := range 20 {
			key := fmt.Sprintf("sdk-%d", i)
			_, err := wf.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
				WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: key, TaskQueue: "q"}}})
			require.NoError(t, err, "round %d, %s", round, key)
			key = fmt.Sprintf("live-%d", i)
			_, err = live.RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{Namespace: "default",
				WorkerHeartbeat: &workerv1.WorkerHeartbeat{WorkerInstanceKey: key, TaskQueue: "q"}})
			require.NoError(t, err, "round %d, %s", round, key)
		}
	}
	_, err = wf.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "sdk-0"})
	require.NoError(t, err, "a shutdown is spared too")
}

func TestSecurity_PrincipalRPSAndLongPolls(t *testing.T) {
	cluster, dial := limitsCluster(t, map[dynamicconfig.Key]any{dynamicconfig.MaxConcurrentLongPolls.Key(): 1})
	admin := dial(testAdminKey)
	greedyKey, _ := createAPIKey(t, admin, "default", "reader,worker")
	politeKey, _ := createAPIKey(t, admin, "default", "reader")
	cluster.DynamicConfig().OverrideValue(dynamicconfig.PrincipalRPS.Key(), 1)
	greedy := livenesspb.NewWorkerLivenessServiceClient(dial(greedyKey))
	polite := livenesspb.NewWorkerLivenessServiceClient(dial(politeKey))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("PrincipalRPS", func(t *testing.T) {
		var err error
		// The bucket refills one token a second: any loaded machine empties it well within
		// these calls.
		for range 1000 {
			if _, err = greedy.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default"}); err != nil {
				break
			}
		}
		require.Equal(t, codes.ResourceExhausted, status.Code(err))
		require.Contains(t, status.Convert(err).Message(), "frontend.principalRPS")
		_, err = polite.ListWorkerLiveness(ctx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default"})
		require.NoError(t, err, "another principal is not affected")
	})

	t.Run("ConcurrentLongPolls", func(t *testing.T) {
		wf := workflowservice.NewWorkflowServiceClient(dial(greedyKey))
		pollCtx, stopPoll := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Polls again whenever it answers (or was itself refused because a probe below held
			// the only slot), so that a poll is open nearly all the time.
			for pollCtx.Err() == nil {
				_, _ = wf.PollActivityTaskQueue(pollCtx, &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: "q"}})
			}
		}()
		require.Eventually(t, func() bool {
			c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, err := wf.PollActivityTaskQueue(c, &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: "q"}})
			return status.Code(err) == codes.ResourceExhausted && status.Convert(err).Message() != ""
		}, 20*time.Second, 10*time.Millisecond, "a second poll is refused while the first is open")
		stopPoll()
		<-done
	})
}

// BenchmarkDescribeWorkerDuringRegistrationStorm measures DescribeWorker in one namespace while
// another namespace is flooded with new worker keys far beyond worker.registrationRPS (issue
// 12: the server stays responsive). It measures; it asserts nothing about time.
func BenchmarkDescribeWorkerDuringRegistrationStorm(b *testing.B) {
	cluster := testcluster.New(b, testcluster.Options{
		Namespaces: []string{"other"},
		DynamicConfig: map[dynamicconfig.Key]any{
			dynamicconfig.WorkerRegistrationRPS.Key():   100,
			dynamicconfig.WorkerRegistrationBurst.Key(): 0,
			dynamicconfig.NamespaceRPS.Key():            0,
		},
	})
	conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	wf := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = wf.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "other",
		WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: "steady", TaskQueue: "q"}}})
	require.NoError(b, err)

	var storm sync.WaitGroup
	var sent atomic.Int64
	for g := range 8 {
		storm.Add(1)
		go func() {
			defer storm.Done()
			for i := 0; ctx.Err() == nil; i++ {
				_, _ = wf.RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
					WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: fmt.Sprintf("storm-%d-%d", g, i), TaskQueue: "q"}}})
				sent.Add(1)
			}
		}()
	}
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		_, err := wf.DescribeWorker(ctx, &workflowservice.DescribeWorkerRequest{Namespace: "other", WorkerInstanceKey: "steady"})
		require.NoError(b, err)
	}
	b.StopTimer()
	b.ReportMetric(float64(sent.Load())/time.Since(start).Seconds(), "storm-registrations-tried/s")
	cancel()
	storm.Wait()
}

// BenchmarkAuthenticatedCall measures what auth adds to a cheap call (GetSystemInfo): off, a
// static admin key (compared in memory), and a stored API key (one store read per call).
func BenchmarkAuthenticatedCall(b *testing.B) {
	run := func(b *testing.B, opts testcluster.Options, key func(testing.TB, *grpc.ClientConn) string) {
		cluster := testcluster.New(b, opts)
		admin, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(testAdminKey))
		require.NoError(b, err)
		defer admin.Close()
		conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(key(b, admin)))
		require.NoError(b, err)
		defer conn.Close()
		wf := workflowservice.NewWorkflowServiceClient(conn)
		b.ResetTimer()
		for range b.N {
			_, err := wf.GetSystemInfo(context.Background(), &workflowservice.GetSystemInfoRequest{})
			require.NoError(b, err)
		}
	}
	authOn := testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey}}
	b.Run("AuthOff", func(b *testing.B) {
		run(b, testcluster.Options{}, func(testing.TB, *grpc.ClientConn) string { return "" })
	})
	b.Run("StaticKey", func(b *testing.B) {
		run(b, authOn, func(testing.TB, *grpc.ClientConn) string { return testAdminKey })
	})
	b.Run("StoredKey", func(b *testing.B) {
		run(b, authOn, func(tb testing.TB, admin *grpc.ClientConn) string {
			key, _ := createAPIKey(tb, admin, "default", "reader")
			return key
		})
	})
}
