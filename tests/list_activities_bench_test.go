package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// BenchmarkListActivityExecutions times one page (100) of ListActivityExecutions over
// benchActivities activities on SQLite: filters on system columns and custom search
// attributes, ORDER BY over a task queue and over the whole namespace, and a later page
// reached by its token. Every query runs against the visibility tables.
func BenchmarkListActivityExecutions(b *testing.B) {
	const benchActivities = 100000
	cluster := testcluster.New(b, testcluster.Options{})
	conn, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close() })
	svc := workflowservice.NewWorkflowServiceClient(conn)
	ctx := context.Background()
	_, err = operatorservice.NewOperatorServiceClient(conn).AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: "default", SearchAttributes: map[string]enumspb.IndexedValueType{
			"Amount": enumspb.INDEXED_VALUE_TYPE_INT, "Customer": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
	require.NoError(b, err)

	ids := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range ids {
				tq := fmt.Sprintf("q-%d", i%1000) // 100 activities a queue
				_, err := svc.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{
					Namespace: "default", ActivityId: fmt.Sprintf("bench-%06d", i), ActivityType: &commonpb.ActivityType{Name: "x"},
					TaskQueue: &taskqueuepb.TaskQueue{Name: tq}, StartToCloseTimeout: durationpb.New(time.Hour), RequestId: fmt.Sprint(i),
					SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
						"Amount": {Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: fmt.Appendf(nil, "%d", i)},
						// 100 activities a customer, spread over the whole range of start times.
						"Customer": {Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: fmt.Appendf(nil, `"c-%d"`, i%1000)},
					}},
				})
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range benchActivities {
		ids <- i
	}
	close(ids)
	wg.Wait()

	for _, bc := range []struct {
		name, query string
		// secondPage times the page after the first one, reached by its token.
		secondPage bool
	}{
		{"TaskQueueIndexed", `TaskQueue = "q-7"`, false},
		{"AllFirstPage", ``, false},
		{"CustomAttributeSelective", `Amount >= 99950`, false},
		{"CustomAttributeInIndexedQueue", `TaskQueue = "q-7" AND Amount >= 10000`, false},
		{"CustomKeywordOrderByStartTime", `Customer = "c-7" ORDER BY StartTime DESC`, false},
		{"CustomRangeOrderByStartTime", `Amount >= 50000 ORDER BY StartTime DESC`, false},
		{"CustomRangeOrderByStartTimeSecondPage", `Amount >= 50000 ORDER BY StartTime DESC`, true},
		{"OrderByCustomAttributeInIndexedQueue", `TaskQueue = "q-7" ORDER BY Amount DESC`, false},
		{"OrderByWholeNamespace", `ORDER BY Amount DESC`, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var token []byte
			if bc.secondPage {
				resp, err := svc.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
					Namespace: "default", PageSize: 100, Query: bc.query})
				require.NoError(b, err)
				require.NotEmpty(b, resp.GetNextPageToken())
				token = resp.GetNextPageToken()
			}
			for b.Loop() {
				resp, err := svc.ListActivityExecutions(ctx, &workflowservice.ListActivityExecutionsRequest{
					Namespace: "default", PageSize: 100, Query: bc.query, NextPageToken: token})
				require.NoError(b, err)
				require.NotEmpty(b, resp.GetExecutions())
			}
		})
	}
}
