package query_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/frontend/query"
	"github.com/vigilhq/vigil/frontend/searchattr"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/sqlite"
)

var storeCustom = map[string]enumspb.IndexedValueType{
	"Customer": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Amount":   enumspb.INDEXED_VALUE_TYPE_INT,
	"Score":    enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Vip":      enumspb.INDEXED_VALUE_TYPE_BOOL,
	"DueAt":    enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"Tags":     enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	"Notes":    enumspb.INDEXED_VALUE_TYPE_TEXT,
}

// randomActivity is activity i of a seeded population, with the payloads its start would
// have stored: each attribute present about two times in three, some values empty.
func randomActivity(r *rand.Rand, i int, t0 time.Time) (*query.Activity, map[string]*commonpb.Payload) {
	statuses := []enumspb.ActivityExecutionStatus{enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED,
		enumspb.ACTIVITY_EXECUTION_STATUS_FAILED, enumspb.ACTIVITY_EXECUTION_STATUS_TIMED_OUT}
	a := &query.Activity{
		ActivityID:   fmt.Sprintf("act-%03d", i),
		RunID:        fmt.Sprintf("run-%d", r.IntN(3)),
		ActivityType: []string{"Charge", "Refund", "Ship"}[r.IntN(3)],
		TaskQueue:    []string{"orders", "orders-eu", "billing"}[r.IntN(3)],
		Status:       statuses[r.IntN(len(statuses))],
		StartTime:    t0.Add(time.Duration(r.IntN(50)) * time.Minute),
	}
	a.ExecutionTime = a.StartTime
	if r.IntN(4) == 0 { // a start delay
		a.ExecutionTime = a.StartTime.Add(time.Duration(1+r.IntN(30)) * time.Minute)
	}
	if a.Status == enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING {
		if r.IntN(2) == 0 {
			a.WorkerInstanceKey = fmt.Sprintf("w-%d", r.IntN(3))
		}
	} else {
		a.CloseTime = a.StartTime.Add(time.Duration(r.IntN(120)) * time.Second)
	}
	fields := map[string]*commonpb.Payload{}
	put := func(name, data string) {
		if r.IntN(3) > 0 {
			fields[name] = &commonpb.Payload{Metadata: map[string][]byte{
				"encoding": []byte("json/plain"), "type": []byte(storeCustom[name].String())}, Data: []byte(data)}
		}
	}
	put("Customer", fmt.Sprintf(`"%s"`, []string{"", "c-1", "c-10", "c-2", "d-1"}[r.IntN(5)]))
	put("Amount", fmt.Sprint(r.IntN(200)-50))
	put("Score", fmt.Sprint(float64(r.IntN(40))/8))
	put("Vip", fmt.Sprint(r.IntN(2) == 0))
	put("DueAt", fmt.Sprintf(`"%s"`, t0.Add(time.Duration(r.IntN(72))*time.Hour).Format(time.RFC3339Nano)))
	put("Tags", []string{`[]`, `["a"]`, `["a","b"]`, `["c"]`, `["b","c","b"]`}[r.IntN(5)])
	put("Notes", fmt.Sprintf(`"%s"`, []string{"", "Rush order", "rush ORDER now", "slow", "!!!"}[r.IntN(5)]))
	a.SearchAttributes = map[string]any{}
	for name, p := range fields {
		v, err := searchattr.Decode(p, storeCustom[name])
		if err == nil && v != nil {
			a.SearchAttributes[name] = v
		}
	}
	return a, fields
}

// TestStoreAnswersAsTheEvaluator runs queries both ways over one population: the evaluator
// (MatchesActivity, CompareActivities) and the SQLite store's visibility tables, paged. The
// store's answer must be the evaluator's, row for row and in order.
func TestStoreAnswersAsTheEvaluator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "vigil.db")}, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	shard, err := store.AcquireShard(ctx, 1, "host")
	require.NoError(t, err)

	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(7, 11))
	var all []*query.Activity
	var writes []*persistence.ExecutionWrite
	for i := range 150 {
		a, fields := randomActivity(r, i, t0)
		all = append(all, a)
		writes = append(writes, &persistence.ExecutionWrite{
			ShardID: 1, RangeID: shard.RangeID, Mode: persistence.WriteModeCreate, NextDBVersion: 1,
			Key:   persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: a.ActivityID, RunID: a.RunID},
			State: []byte(a.ActivityID), Lifecycle: persistence.LifecycleRunning,
			Visibility: &visibility.Record{TypeName: a.ActivityType, TaskQueue: a.TaskQueue, WorkerInstanceKey: a.WorkerInstanceKey,
				Status: int32(a.Status), StartTime: a.StartTime, ExecutionTime: a.ExecutionTime, CloseTime: a.CloseTime,
				Attributes: visibility.AttributesOf(&commonpb.SearchAttributes{IndexedFields: fields})},
		})
	}
	results, err := store.WriteBatch(ctx, writes)
	require.NoError(t, err)
	for _, err := range results {
		require.NoError(t, err)
	}

	queries := []string{
		``,
		`Customer = "c-1"`, `Customer != "c-1"`, `Customer = ""`, `Customer IN ("c-1", "d-1")`, `Customer NOT IN ("c-1")`,
		`Customer STARTS_WITH "c-1"`, `Customer NOT STARTS_WITH "c"`, `Customer IS NULL`, `Customer IS NOT NULL`,
		`Amount > 20`, `Amount <= -10`, `Amount != 7`, `Amount BETWEEN 0 AND 50`, `Amount NOT BETWEEN 0 AND 50`,
		`Amount IN (1, 2, 3, 100)`, `Amount NOT IN (1, 2, 3)`, `Amount IS NULL`,
		`Score >= 2.5`, `Score < 1`, `Score BETWEEN 0.5 AND 1.5`, `Vip = true`, `Vip != true`, `Vip IS NULL`,
		`DueAt > "2026-03-02T00:00:00Z"`, `DueAt BETWEEN "2026-03-01T00:00:00Z" AND "2026-03-02T12:00:00Z"`, `DueAt IS NOT NULL`,
		`Tags = "a"`, `Tags != "a"`, `Tags IN ("b", "c")`, `Tags NOT IN ("b", "c")`, `Tags IS NULL`, `Tags IS NOT NULL`,
		`Notes = "rush"`, `Notes = "order RUSH"`, `Notes != "rush"`, `Notes = ""`, `Notes IS NULL`, `Notes IS NOT NULL`,
		`ActivityId STARTS_WITH "act-1"`, `ActivityId NOT STARTS_WITH "act-0"`, `RunId = "run-1"`, `ActivityType IN ("Ship", "Charge")`,
		`TaskQueue = "orders"`, `WorkerInstanceKey = "w-1"`, `WorkerInstanceKey IS NULL`, `WorkerInstanceKey IS NOT NULL`,
		`ExecutionStatus = "Running"`, `ExecutionStatus != "Running"`, `Status IN ("Failed", "TimedOut")`,
		`StartTime > "2026-03-01T12:30:00Z"`, `StartTime NOT BETWEEN "2026-03-01T12:10:00Z" AND "2026-03-01T12:40:00Z"`,
		`CloseTime IS NULL`, `CloseTime >= "2026-03-01T12:20:00Z"`, `ExecutionTime < "2026-03-01T12:05:00Z"`,
		`ExecutionTime > "2026-03-01T12:45:00Z"`, `ExecutionTime BETWEEN "2026-03-01T12:20:00Z" AND "2026-03-01T12:30:00Z"`,
		`ExecutionDuration > "60s"`, `ExecutionDuration <= 30000000000`, `ExecutionDuration IS NULL`,
		`(Customer = "c-1" OR Amount > 100) AND ExecutionStatus = "Running"`,
		`Tags = "a" AND (Vip = true OR Notes = "rush") OR TaskQueue = "billing"`,
		`ORDER BY StartTime DESC`, `ORDER BY Amount`, `ORDER BY Amount DESC`, `ORDER BY Customer, StartTime DESC`,
		`ORDER BY CloseTime`, `ORDER BY ExecutionTime DESC`, `ORDER BY CloseTime DESC, ActivityId`, `ORDER BY ExecutionStatus, Score DESC, DueAt`,
		`ORDER BY Vip DESC, ExecutionDuration`, `Amount > 0 ORDER BY DueAt DESC`, `TaskQueue = "orders" ORDER BY RunId DESC, Amount`,
	}
	partial := 0 // queries that select some activities but not all
	for _, text := range queries {
		q, err := query.ParseActivitiesWith(text, storeCustom)
		require.NoError(t, err, text)
		var want []string
		var matches []*query.Activity
		for _, a := range all {
			if q.MatchesActivity(a) {
				matches = append(matches, a)
			}
		}
		slices.SortFunc(matches, q.CompareActivities)
		for _, a := range matches {
			want = append(want, a.ActivityID+"/"+a.RunID)
		}

		vq, err := q.Visibility()
		require.NoError(t, err, text)
		var got []string
		var token []byte
		for {
			resp, err := store.ListExecutions(ctx, persistence.ListExecutionsRequest{
				NamespaceID: "ns", ArchetypeID: 1, Visibility: vq, PageSize: 7, NextPageToken: token})
			require.NoError(t, err, text)
			for _, e := range resp.Executions {
				got = append(got, e.Key.BusinessID+"/"+e.Key.RunID)
			}
			if token = resp.NextPageToken; token == nil {
				break
			}
		}
		require.Equal(t, want, got, text)
		if len(want) > 0 && len(want) < len(all) {
			partial++
		}
		total, _, err := store.CountVisibility(ctx, persistence.ListExecutionsRequest{NamespaceID: "ns", ArchetypeID: 1, Visibility: vq})
		require.NoError(t, err, text)
		require.EqualValues(t, len(want), total, text)
	}
	require.Greater(t, partial, len(queries)*3/4, "the population exercises the queries")
}
