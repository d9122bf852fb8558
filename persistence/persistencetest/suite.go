// Package persistencetest is the contract suite every persistence.Store backend must pass.
//
// A backend's test calls RunStoreSuite with a constructor of fresh, empty stores:
//
//	func TestStore(t *testing.T) {
//		persistencetest.RunStoreSuite(t, func(t *testing.T) persistence.Store { ... })
//	}
//
// Subtests are named by the behaviour they pin down, and each gets its own store.
package persistencetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

// RunStoreSuite runs the contract suite. newStore must return a fresh, empty store; the suite
// closes it when the subtest ends.
func RunStoreSuite(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	for _, tc := range suiteCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			tc.run(t, newBundle(t, s))
		})
	}
}

var suiteCases = []struct {
	name string
	run  func(t *testing.T, b *bundle)
}{
	{"CreateThenGet", testCreateThenGet},
	{"GetMissingIsNotFound", testGetMissingIsNotFound},
	{"ReadsAreScopedToShard", testReadsAreScopedToShard},
	{"AcquireShardIncrementsRangeID", testAcquireShardIncrementsRangeID},
	{"StaleWriteIsRefused", testStaleWriteIsRefused},
	{"UpdateOfMissingRunIsNotFound", testUpdateOfMissingRunIsNotFound},
	{"FencedWriteAfterShardReacquired", testFencedWriteAfterShardReacquired},
	{"WriteToUnacquiredShardIsFenced", testWriteToUnacquiredShardIsFenced},
	{"CreateOfExistingRunFails", testCreateOfExistingRunFails},
	{"CurrentExecutionConflict", testCurrentExecutionConflict},
	{"CurrentLifecycleFollowsUpdates", testCurrentLifecycleFollowsUpdates},
	{"FailedWriteInBatchLeavesNoTrace", testFailedWriteInBatchLeavesNoTrace},
	{"WritesInBatchApplyInOrder", testWritesInBatchApplyInOrder},
	{"EmptyBatchIsNoOp", testEmptyBatchIsNoOp},
	{"MalformedWriteFailsAlone", testMalformedWriteFailsAlone},
	{"SingletonTimerReplacedInPlace", testSingletonTimerReplacedInPlace},
	{"TimerTasksPagedInOrder", testTimerTasksPagedInOrder},
	{"OutboundTasksPagedInOrder", testOutboundTasksPagedInOrder},
	{"CompletedTasksAreGone", testCompletedTasksAreGone},
	{"CollectionsUntouchedByStateWrite", testCollectionsUntouchedByStateWrite},
	{"CollectionPutsAndDeletes", testCollectionPutsAndDeletes},
	{"ManyCollectionChangesInOneWrite", testManyCollectionChangesInOneWrite},
	{"DeleteRemovesEverything", testDeleteRemovesEverything},
	{"DeleteKeepsNewerCurrentRun", testDeleteKeepsNewerCurrentRun},
	{"DeleteWithStaleVersionIsRefused", testDeleteWithStaleVersionIsRefused},
	{"ListPaginatesEveryExecutionOnce", testListPaginatesEveryExecutionOnce},
	{"ListPagingSurvivesConcurrentCreates", testListPagingSurvivesConcurrentCreates},
	{"ListFiltersByIndexedFields", testListFiltersByIndexedFields},
	{"ClusterMetadataFixesShardCount", testClusterMetadataFixesShardCount},
	{"ConcurrentBatchesAreSerializable", testConcurrentBatchesAreSerializable},
	{"TimePrecisionRoundTrips", testTimePrecisionRoundTrips},
	{"RespectsContextCancellation", testRespectsContextCancellation},
	{"FenceFailsOnlyItsShardsWrites", testFenceFailsOnlyItsShardsWrites},
	{"DeleteThenCreateInOneBatch", testDeleteThenCreateInOneBatch},
	{"EveryKindOfFailureInOneBatch", testEveryKindOfFailureInOneBatch},
	{"LargeBatchWithOneFailure", testLargeBatchWithOneFailure},
	{"APIKeysStoredRevokedAndListed", testAPIKeysStoredRevokedAndListed},
	{"ClusterKeysFirstWriterWins", testClusterKeysFirstWriterWins},
	{"NamespacesCreatedUpdatedAndListed", testNamespacesCreatedUpdatedAndListed},
	{"ConcurrentNamespaceUpdatesOneWins", testConcurrentNamespaceUpdatesOneWins},
	{"NamespaceRenamedAndDeleted", testNamespaceRenamedAndDeleted},
}

const (
	testNamespace = "ns-test"
	testArchetype = uint32(7)
	testShard     = int32(3)
)

// baseTime has nanoseconds on purpose: every time the suite writes must round-trip exactly.
var baseTime = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// bundle is a subtest's setup: a store and an acquired shard.
type bundle struct {
	t       *testing.T
	ctx     context.Context
	store   persistence.Store
	shardID int32
	rangeID int64
}

func newBundle(t *testing.T, s persistence.Store) *bundle {
	ctx := context.Background()
	info, err := s.AcquireShard(ctx, testShard, "host-a")
	require.NoError(t, err)
	return &bundle{t: t, ctx: ctx, store: s, shardID: testShard, rangeID: info.RangeID}
}

func key(businessID, runID string) persistence.ExecutionKey {
	return persistence.ExecutionKey{NamespaceID: testNamespace, ArchetypeID: testArchetype, BusinessID: businessID, RunID: runID}
}

// create returns a create write for key at db version 1 with no expected current run.
func (b *bundle) create(k persistence.ExecutionKey) *persistence.ExecutionWrite {
	return &persistence.ExecutionWrite{
		ShardID:       b.shardID,
		RangeID:       b.rangeID,
		Mode:          persistence.WriteModeCreate,
		Key:           k,
		NextDBVersion: 1,
		State:         []byte("state-1 of " + k.BusinessID),
		Lifecycle:     persistence.LifecycleRunning,
	}
}

// update returns an update write from version prev to prev+1.
func (b *bundle) update(k persistence.ExecutionKey, prev int64) *persistence.ExecutionWrite {
	return &persistence.ExecutionWrite{
		ShardID:       b.shardID,
		RangeID:       b.rangeID,
		Mode:          persistence.WriteModeUpdate,
		Key:           k,
		PrevDBVersion: prev,
		NextDBVersion: prev + 1,
		State:         []byte(fmt.Sprintf("state-%d of %s", prev+1, k.BusinessID)),
		Lifecycle:     persistence.LifecycleRunning,
	}
}

func (b *bundle) del(k persistence.ExecutionKey, prev int64) *persistence.ExecutionWrite {
	return &persistence.ExecutionWrite{
		ShardID: b.shardID, RangeID: b.rangeID, Mode: persistence.WriteModeDelete, Key: k, PrevDBVersion: prev,
	}
}

func (b *bundle) timer(k persistence.ExecutionKey, taskID int64, at time.Time, taskType uint32, singleton bool) *persistence.TimerTask {
	return &persistence.TimerTask{
		ShardID: b.shardID, TaskID: taskID, VisibilityTime: at, Execution: k, TaskTypeID: taskType,
		Singleton: singleton, Payload: []byte(fmt.Sprintf("timer-%d", taskID)),
	}
}

func (b *bundle) outbound(k persistence.ExecutionKey, taskID int64, destination string) *persistence.OutboundTask {
	return &persistence.OutboundTask{
		ShardID: b.shardID, TaskID: taskID, Destination: destination, Execution: k, TaskTypeID: 11,
		Payload: []byte(fmt.Sprintf("outbound-%d", taskID)), CreatedTime: baseTime.Add(time.Duration(taskID) * time.Microsecond),
	}
}

// write runs a batch that must not fail as a whole and returns the per-write results.
func (b *bundle) write(writes ...*persistence.ExecutionWrite) []error {
	b.t.Helper()
	results, err := b.store.WriteBatch(b.ctx, writes)
	require.NoError(b.t, err)
	require.Len(b.t, results, len(writes))
	return results
}

// mustWrite runs a batch in which every write must succeed.
func (b *bundle) mustWrite(writes ...*persistence.ExecutionWrite) {
	b.t.Helper()
	for i, err := range b.write(writes...) {
		require.NoError(b.t, err, "write %d", i)
	}
}

func (b *bundle) get(k persistence.ExecutionKey) *persistence.ExecutionRecord {
	b.t.Helper()
	rec, err := b.store.GetExecution(b.ctx, b.shardID, k)
	require.NoError(b.t, err)
	return rec
}

func (b *bundle) requireNotFound(k persistence.ExecutionKey) {
	b.t.Helper()
	_, err := b.store.GetExecution(b.ctx, b.shardID, k)
	var nf *persistence.NotFoundError
	require.ErrorAs(b.t, err, &nf)
}

func (b *bundle) current(k persistence.CurrentExecutionKey) *persistence.CurrentExecution {
	b.t.Helper()
	cur, err := b.store.GetCurrentExecution(b.ctx, b.shardID, k)
	require.NoError(b.t, err)
	return cur
}

// allTimers reads every timer task of the shard, paging by 1000.
func (b *bundle) allTimers() []*persistence.TimerTask {
	b.t.Helper()
	tasks, err := b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, Before: baseTime.Add(1000 * time.Hour), PageSize: 1000,
	})
	require.NoError(b.t, err)
	return tasks
}

func (b *bundle) allOutbound() []*persistence.OutboundTask {
	b.t.Helper()
	tasks, err := b.store.GetOutboundTasks(b.ctx, b.shardID, 0, 1000)
	require.NoError(b.t, err)
	return tasks
}

func timerIDs(tasks []*persistence.TimerTask) []int64 {
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.TaskID
	}
	return ids
}

func outboundIDs(tasks []*persistence.OutboundTask) []int64 {
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.TaskID
	}
	return ids
}

func testCreateThenGet(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	w := b.create(k)
	w.Indexed = persistence.IndexedFields{Status: "RUNNING", TaskQueue: "tq-1"}
	w.CollectionPuts = []persistence.CollectionEntry{
		{Collection: "bound", Key: "act-2", Value: []byte("v2")},
		{Collection: "bound", Key: "act-1", Value: []byte("v1")},
		{Collection: "alpha", Key: "z", Value: []byte("vz")},
	}
	w.TimerTasks = []*persistence.TimerTask{b.timer(k, 10, baseTime.Add(time.Minute), 1, true)}
	w.OutboundTasks = []*persistence.OutboundTask{b.outbound(k, 20, "shard-9")}
	b.mustWrite(w)

	rec := b.get(k)
	require.Equal(t, k, rec.Key)
	require.Equal(t, int64(1), rec.DBVersion)
	require.Equal(t, w.State, rec.State)
	require.Equal(t, persistence.LifecycleRunning, rec.Lifecycle)
	require.Equal(t, w.Indexed, rec.Indexed)
	require.Equal(t, []persistence.CollectionEntry{
		{Collection: "alpha", Key: "z", Value: []byte("vz")},
		{Collection: "bound", Key: "act-1", Value: []byte("v1")},
		{Collection: "bound", Key: "act-2", Value: []byte("v2")},
	}, rec.Collections, "collections come back in (Collection, Key) order")

	require.Equal(t, &persistence.CurrentExecution{RunID: "run-1", Lifecycle: persistence.LifecycleRunning},
		b.current(k.CurrentKey()))
	require.Equal(t, w.TimerTasks, b.allTimers())
	require.Equal(t, w.OutboundTasks, b.allOutbound())
}

func testGetMissingIsNotFound(t *testing.T, b *bundle) {
	var nf *persistence.NotFoundError
	_, err := b.store.GetExecution(b.ctx, b.shardID, key("nobody", "run-1"))
	require.ErrorAs(t, err, &nf)
	_, err = b.store.GetCurrentExecution(b.ctx, b.shardID, key("nobody", "").CurrentKey())
	require.ErrorAs(t, err, &nf)
	_, err = b.store.GetShard(b.ctx, 999)
	require.ErrorAs(t, err, &nf)
}

func testReadsAreScopedToShard(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	var nf *persistence.NotFoundError
	_, err := b.store.GetExecution(b.ctx, b.shardID+1, k)
	require.ErrorAs(t, err, &nf)
	_, err = b.store.GetCurrentExecution(b.ctx, b.shardID+1, k.CurrentKey())
	require.ErrorAs(t, err, &nf)
}

func testAcquireShardIncrementsRangeID(t *testing.T, b *bundle) {
	info, err := b.store.GetShard(b.ctx, b.shardID)
	require.NoError(t, err)
	require.Equal(t, persistence.ShardInfo{ShardID: b.shardID, RangeID: b.rangeID, Owner: "host-a"}, info)
	require.Positive(t, info.RangeID)

	next, err := b.store.AcquireShard(b.ctx, b.shardID, "host-b")
	require.NoError(t, err)
	require.Greater(t, next.RangeID, b.rangeID)
	require.Equal(t, "host-b", next.Owner)
	require.Equal(t, b.shardID, next.ShardID)

	info, err = b.store.GetShard(b.ctx, b.shardID)
	require.NoError(t, err)
	require.Equal(t, next, info)

	other, err := b.store.AcquireShard(b.ctx, b.shardID+1, "host-a")
	require.NoError(t, err)
	require.Positive(t, other.RangeID)
	info, err = b.store.GetShard(b.ctx, b.shardID)
	require.NoError(t, err)
	require.Equal(t, next, info, "acquiring one shard leaves others alone")
}

func testStaleWriteIsRefused(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	b.mustWrite(b.update(k, 1))

	stale := b.update(k, 1)
	stale.State = []byte("lost update")
	err := b.write(stale)[0]
	var cf *persistence.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.Equal(t, k, cf.Key)
	require.Equal(t, int64(1), cf.ExpectedVersion)
	require.Equal(t, int64(2), cf.ActualVersion)

	rec := b.get(k)
	require.Equal(t, int64(2), rec.DBVersion)
	require.Equal(t, []byte("state-2 of worker-1"), rec.State)
}

func testUpdateOfMissingRunIsNotFound(t *testing.T, b *bundle) {
	err := b.write(b.update(key("ghost", "run-1"), 1))[0]
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
	b.requireNotFound(key("ghost", "run-1"))
}

func testFencedWriteAfterShardReacquired(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	oldRange := b.rangeID

	stolen, err := b.store.AcquireShard(b.ctx, b.shardID, "host-b")
	require.NoError(t, err)

	// host-a still believes it owns the shard.
	w := b.update(k, 1)
	w.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	w.TimerTasks = []*persistence.TimerTask{b.timer(k, 1, baseTime, 1, false)}
	err = b.write(w)[0]
	var lost *persistence.ShardOwnershipLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, persistence.ShardOwnershipLostError{ShardID: b.shardID, RangeID: oldRange, StoredRangeID: stolen.RangeID}, *lost)

	create := b.create(key("worker-2", "run-1"))
	err = b.write(create)[0]
	require.ErrorAs(t, err, &lost, "creates are fenced too")

	rec := b.get(k)
	require.Equal(t, int64(1), rec.DBVersion)
	require.Empty(t, rec.Collections)
	require.Empty(t, b.allTimers())
	b.requireNotFound(key("worker-2", "run-1"))

	// The new owner writes with its range_id.
	b.rangeID = stolen.RangeID
	b.mustWrite(b.update(k, 1))
	require.Equal(t, int64(2), b.get(k).DBVersion)
}

func testWriteToUnacquiredShardIsFenced(t *testing.T, b *bundle) {
	w := b.create(key("worker-1", "run-1"))
	w.ShardID = b.shardID + 100
	err := b.write(w)[0]
	var lost *persistence.ShardOwnershipLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, w.ShardID, lost.ShardID)
}

func testCreateOfExistingRunFails(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	again := b.create(k)
	again.ExpectedCurrentRunID = "run-1"
	again.State = []byte("overwrite")
	err := b.write(again)[0]
	var exists *persistence.ExecutionAlreadyExistsError
	require.ErrorAs(t, err, &exists)
	require.Equal(t, k, exists.Key)
	require.Equal(t, []byte("state-1 of worker-1"), b.get(k).State)
}

func testCurrentExecutionConflict(t *testing.T, b *bundle) {
	run1 := key("worker-1", "run-1")
	run2 := key("worker-1", "run-2")
	b.mustWrite(b.create(run1))

	// Expecting no current run while run-1 holds the business ID.
	err := b.write(b.create(run2))[0]
	var conflict *persistence.CurrentExecutionConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, persistence.CurrentExecutionConflictError{
		Key: run1.CurrentKey(), CurrentRunID: "run-1", Lifecycle: persistence.LifecycleRunning,
	}, *conflict)
	b.requireNotFound(run2)

	// Expecting the wrong run.
	wrong := b.create(run2)
	wrong.ExpectedCurrentRunID = "run-0"
	err = b.write(wrong)[0]
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "run-1", conflict.CurrentRunID)

	// Expecting a run when there is none.
	lonely := b.create(key("worker-2", "run-1"))
	lonely.ExpectedCurrentRunID = "run-0"
	err = b.write(lonely)[0]
	require.ErrorAs(t, err, &conflict)
	require.Empty(t, conflict.CurrentRunID)

	// Expecting the right run: the new run becomes current, the old one stays readable.
	right := b.create(run2)
	right.ExpectedCurrentRunID = "run-1"
	b.mustWrite(right)
	require.Equal(t, "run-2", b.current(run1.CurrentKey()).RunID)
	require.Equal(t, int64(1), b.get(run1).DBVersion)
}

func testCurrentLifecycleFollowsUpdates(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	running := persistence.LifecycleRunning
	same := b.update(k, 1)
	same.PrevLifecycle = &running // the writer knows the lifecycle stays as stored
	b.mustWrite(same)
	require.Equal(t, &persistence.CurrentExecution{RunID: "run-1", Lifecycle: persistence.LifecycleRunning},
		b.current(k.CurrentKey()))
	done := b.update(k, 2)
	done.Lifecycle = persistence.LifecycleCompleted
	done.PrevLifecycle = &running
	b.mustWrite(done)
	require.Equal(t, persistence.LifecycleCompleted, b.get(k).Lifecycle)
	require.Equal(t, &persistence.CurrentExecution{RunID: "run-1", Lifecycle: persistence.LifecycleCompleted},
		b.current(k.CurrentKey()))

	// Updating a run that is no longer current leaves the current row alone.
	next := b.create(key("worker-1", "run-2"))
	next.ExpectedCurrentRunID = "run-1"
	b.mustWrite(next)
	failed := b.update(k, 3)
	failed.Lifecycle = persistence.LifecycleFailed
	b.mustWrite(failed)
	require.Equal(t, &persistence.CurrentExecution{RunID: "run-2", Lifecycle: persistence.LifecycleRunning},
		b.current(k.CurrentKey()))
}

func testFailedWriteInBatchLeavesNoTrace(t *testing.T, b *bundle) {
	existing := key("existing", "run-1")
	w := b.create(existing)
	w.TimerTasks = []*persistence.TimerTask{b.timer(existing, 1, baseTime, 1, false)}
	b.mustWrite(w)

	good1 := b.create(key("good-1", "run-1"))
	// bad gets past every check, writes its run, current row, collections and an outbound
	// task, and only then collides with the existing timer's key (same shard, time, task ID).
	badKey := key("bad", "run-1")
	bad := b.create(badKey)
	bad.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	bad.OutboundTasks = []*persistence.OutboundTask{b.outbound(badKey, 5, "d")}
	bad.TimerTasks = []*persistence.TimerTask{
		b.timer(badKey, 2, baseTime.Add(time.Second), 1, true),
		b.timer(badKey, 1, baseTime, 1, false),
	}
	stale := b.update(existing, 7)
	stale.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	good2 := b.update(existing, 1)

	results := b.write(good1, bad, stale, good2)
	require.NoError(t, results[0])
	require.Error(t, results[1])
	var cf *persistence.ConditionFailedError
	require.ErrorAs(t, results[2], &cf)
	require.NoError(t, results[3])

	b.requireNotFound(badKey)
	_, err := b.store.GetCurrentExecution(b.ctx, b.shardID, badKey.CurrentKey())
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, []int64{1}, timerIDs(b.allTimers()))
	require.Empty(t, b.allOutbound())
	require.Empty(t, b.get(existing).Collections)

	require.Equal(t, int64(1), b.get(key("good-1", "run-1")).DBVersion)
	require.Equal(t, int64(2), b.get(existing).DBVersion)
}

func testWritesInBatchApplyInOrder(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	results := b.write(b.create(k), b.update(k, 1), b.update(k, 1), b.update(k, 2))
	require.NoError(t, results[0])
	require.NoError(t, results[1])
	var cf *persistence.ConditionFailedError
	require.ErrorAs(t, results[2], &cf, "the second update from version 1 sees the first")
	require.NoError(t, results[3])
	require.Equal(t, int64(3), b.get(k).DBVersion)
}

func testEmptyBatchIsNoOp(t *testing.T, b *bundle) {
	results, err := b.store.WriteBatch(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, results)
}

func testMalformedWriteFailsAlone(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))

	bothPutAndDelete := b.update(k, 1)
	bothPutAndDelete.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	bothPutAndDelete.CollectionDeletes = []persistence.CollectionEntryKey{{Collection: "c", Key: "k"}}
	versionNotIncreasing := b.update(k, 1)
	versionNotIncreasing.NextDBVersion = 1
	badMode := b.update(k, 1)
	badMode.Mode = 0
	foreignTimer := b.update(k, 1)
	foreignTimer.TimerTasks = []*persistence.TimerTask{b.timer(key("someone-else", "run-1"), 1, baseTime, 1, false)}
	deleteWithTasks := b.del(k, 1)
	deleteWithTasks.OutboundTasks = []*persistence.OutboundTask{b.outbound(k, 1, "d")}
	good := b.create(key("worker-2", "run-1"))

	results := b.write(bothPutAndDelete, versionNotIncreasing, badMode, foreignTimer, deleteWithTasks, good)
	for i := range 5 {
		require.Error(t, results[i], "malformed write %d", i)
		require.False(t, errors.As(results[i], new(*persistence.ConditionFailedError)), "write %d: %v", i, results[i])
	}
	require.NoError(t, results[5])
	require.Equal(t, int64(1), b.get(k).DBVersion)
	require.Empty(t, b.allTimers())
	require.Empty(t, b.allOutbound())
}

func testSingletonTimerReplacedInPlace(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	other := key("worker-2", "run-1")
	const leaseExpiry, cleanup = 1, 2

	w := b.create(k)
	w.TimerTasks = []*persistence.TimerTask{b.timer(k, 1, baseTime.Add(10*time.Second), leaseExpiry, true)}
	o := b.create(other)
	o.TimerTasks = []*persistence.TimerTask{b.timer(other, 2, baseTime.Add(10*time.Second), leaseExpiry, true)}
	b.mustWrite(w, o)

	// Each heartbeat moves the lease-expiry timer; the row is replaced, not added.
	version := int64(1)
	for i := int64(0); i < 5; i++ {
		hb := b.update(k, version)
		hb.TimerTasks = []*persistence.TimerTask{b.timer(k, 100+i, baseTime.Add(time.Duration(20+i)*time.Second), leaseExpiry, true)}
		b.mustWrite(hb)
		version++
	}
	// A second singleton type and plain timers coexist with it; plain timers accumulate.
	more := b.update(k, version)
	more.TimerTasks = []*persistence.TimerTask{
		b.timer(k, 200, baseTime.Add(time.Hour), cleanup, true),
		b.timer(k, 201, baseTime.Add(time.Minute), leaseExpiry, false),
		b.timer(k, 202, baseTime.Add(time.Minute), leaseExpiry, false),
	}
	b.mustWrite(more)
	version++

	// Two singletons of one type in one write: the later one wins.
	twice := b.update(k, version)
	twice.TimerTasks = []*persistence.TimerTask{
		b.timer(k, 300, baseTime.Add(30*time.Second), leaseExpiry, true),
		b.timer(k, 301, baseTime.Add(31*time.Second), leaseExpiry, true),
	}
	b.mustWrite(twice)

	timers := b.allTimers()
	require.Equal(t, []int64{2, 301, 201, 202, 200}, timerIDs(timers))
	require.Equal(t, baseTime.Add(31*time.Second), timers[1].VisibilityTime)
	require.True(t, timers[1].Singleton)
	require.False(t, timers[2].Singleton)
}

func testTimerTasksPagedInOrder(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	// Inserted out of order; several share a visibility time and are ordered by task ID.
	offsets := []struct {
		id int64
		at time.Duration
	}{
		{7, 3 * time.Second}, {3, time.Second}, {9, time.Second}, {1, 2 * time.Second},
		{5, time.Second + time.Nanosecond}, {2, 4 * time.Second}, {8, 3 * time.Second},
		{4, 0}, {6, 10 * time.Second},
	}
	w := b.create(k)
	for _, o := range offsets {
		w.TimerTasks = append(w.TimerTasks, b.timer(k, o.id, baseTime.Add(o.at), 1, false))
	}
	// Another shard's timers never show.
	otherShard, err := b.store.AcquireShard(b.ctx, b.shardID+1, "host-a")
	require.NoError(t, err)
	ok := key("worker-other-shard", "run-1")
	ow := b.create(ok)
	ow.ShardID, ow.RangeID = otherShard.ShardID, otherShard.RangeID
	ot := b.timer(ok, 1, baseTime, 1, false)
	ot.ShardID = otherShard.ShardID
	ow.TimerTasks = []*persistence.TimerTask{ot}
	b.mustWrite(w, ow)

	before := baseTime.Add(10 * time.Second) // excludes task 6
	var got []*persistence.TimerTask
	req := persistence.GetTimerTasksRequest{ShardID: b.shardID, Before: before, PageSize: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging does not terminate")
		page, err := b.store.GetTimerTasks(b.ctx, req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), req.PageSize)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		req.After = page[len(page)-1].Key()
	}
	require.Equal(t, []int64{4, 3, 9, 5, 1, 7, 8, 2}, timerIDs(got))
	for i := 1; i < len(got); i++ {
		require.Negative(t, got[i-1].Key().Compare(got[i].Key()))
	}

	// After is exclusive on (time, task ID), not on time alone.
	page, err := b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, After: persistence.TimerTaskKey{VisibilityTime: baseTime.Add(time.Second), TaskID: 3},
		Before: before, PageSize: 2,
	})
	require.NoError(t, err)
	require.Equal(t, []int64{9, 5}, timerIDs(page))

	// Before is exclusive.
	page, err = b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, Before: baseTime.Add(time.Second), PageSize: 100,
	})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, timerIDs(page))
}

func testOutboundTasksPagedInOrder(t *testing.T, b *bundle) {
	k1, k2 := key("worker-1", "run-1"), key("worker-2", "run-1")
	w1, w2 := b.create(k1), b.create(k2)
	for _, id := range []int64{50, 10, 30} {
		w1.OutboundTasks = append(w1.OutboundTasks, b.outbound(k1, id, "shard-1"))
	}
	for _, id := range []int64{20, 40, 60, 70} {
		w2.OutboundTasks = append(w2.OutboundTasks, b.outbound(k2, id, "shard-2"))
	}
	b.mustWrite(w1, w2)

	var got []*persistence.OutboundTask
	after := int64(0)
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging does not terminate")
		page, err := b.store.GetOutboundTasks(b.ctx, b.shardID, after, 3)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 3)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].TaskID
	}
	require.Equal(t, []int64{10, 20, 30, 40, 50, 60, 70}, outboundIDs(got))
	require.Equal(t, "shard-2", got[1].Destination)
	require.Equal(t, k2, got[1].Execution)
	require.Equal(t, b.outbound(k2, 20, "shard-2"), got[1])

	page, err := b.store.GetOutboundTasks(b.ctx, b.shardID+1, 0, 100)
	require.NoError(t, err)
	require.Empty(t, page, "tasks belong to their shard")
}

func testCompletedTasksAreGone(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	w := b.create(k)
	w.TimerTasks = []*persistence.TimerTask{b.timer(k, 1, baseTime, 1, false), b.timer(k, 2, baseTime, 1, false)}
	w.OutboundTasks = []*persistence.OutboundTask{b.outbound(k, 3, "d"), b.outbound(k, 4, "d")}
	b.mustWrite(w)

	require.NoError(t, b.store.CompleteTimerTasks(b.ctx, b.shardID, []persistence.TimerTaskKey{w.TimerTasks[0].Key()}))
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID, []int64{4}))
	require.Equal(t, []int64{2}, timerIDs(b.allTimers()))
	require.Equal(t, []int64{3}, outboundIDs(b.allOutbound()))

	// Completing twice, or a task that never existed, is not an error.
	require.NoError(t, b.store.CompleteTimerTasks(b.ctx, b.shardID, []persistence.TimerTaskKey{w.TimerTasks[0].Key()}))
	require.NoError(t, b.store.CompleteTimerTasks(b.ctx, b.shardID, []persistence.TimerTaskKey{{VisibilityTime: baseTime, TaskID: 99}}))
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID, []int64{4}))
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID, []int64{99}))
	// A task key in another shard is another task.
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID+1, []int64{3}))
	require.Equal(t, []int64{3}, outboundIDs(b.allOutbound()))

	// A batch deletes every task it names, in one call; an empty batch is a no-op.
	batch := b.create(key("worker-2", "run-1"))
	var keys []persistence.TimerTaskKey
	var ids []int64
	for i := range 50 {
		timer := b.timer(batch.Key, int64(100+i), baseTime.Add(time.Duration(i)*time.Millisecond), 1, false)
		batch.TimerTasks = append(batch.TimerTasks, timer)
		keys = append(keys, timer.Key())
		batch.OutboundTasks = append(batch.OutboundTasks, b.outbound(batch.Key, int64(200+i), "d"))
		ids = append(ids, int64(200+i))
	}
	b.mustWrite(batch)
	require.NoError(t, b.store.CompleteTimerTasks(b.ctx, b.shardID, keys))
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID, ids))
	require.NoError(t, b.store.CompleteTimerTasks(b.ctx, b.shardID, nil))
	require.NoError(t, b.store.CompleteOutboundTasks(b.ctx, b.shardID, nil))
	require.Equal(t, []int64{2}, timerIDs(b.allTimers()))
	require.Equal(t, []int64{3}, outboundIDs(b.allOutbound()))
}

func testCollectionsUntouchedByStateWrite(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	w := b.create(k)
	for i := range 50 {
		w.CollectionPuts = append(w.CollectionPuts, persistence.CollectionEntry{
			Collection: "bound", Key: fmt.Sprintf("act-%03d", i), Value: []byte(fmt.Sprintf("attempt-%d", i)),
		})
	}
	w.CollectionPuts = append(w.CollectionPuts, persistence.CollectionEntry{Collection: "other", Key: "x", Value: []byte("y")})
	b.mustWrite(w)
	before := b.get(k).Collections
	require.Len(t, before, 51)

	// A heartbeat: state and indexed fields change, no collection delta.
	hb := b.update(k, 1)
	hb.State = []byte("heartbeat")
	hb.Indexed = persistence.IndexedFields{Status: "RUNNING", TaskQueue: "tq"}
	b.mustWrite(hb)

	rec := b.get(k)
	require.Equal(t, []byte("heartbeat"), rec.State)
	require.Equal(t, before, rec.Collections)
}

func testCollectionPutsAndDeletes(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	w := b.create(k)
	w.CollectionPuts = []persistence.CollectionEntry{
		{Collection: "bound", Key: "a", Value: []byte("1")},
		{Collection: "bound", Key: "b", Value: []byte("1")},
		{Collection: "unbound", Key: "a", Value: []byte("1")},
	}
	b.mustWrite(w)

	u := b.update(k, 1)
	u.CollectionPuts = []persistence.CollectionEntry{
		{Collection: "bound", Key: "a", Value: []byte("2")}, // replace
		{Collection: "bound", Key: "c", Value: []byte("1")}, // insert
	}
	u.CollectionDeletes = []persistence.CollectionEntryKey{
		{Collection: "bound", Key: "b"},
		{Collection: "bound", Key: "missing"}, // not an error
	}
	b.mustWrite(u)

	require.Equal(t, []persistence.CollectionEntry{
		{Collection: "bound", Key: "a", Value: []byte("2")},
		{Collection: "bound", Key: "c", Value: []byte("1")},
		{Collection: "unbound", Key: "a", Value: []byte("1")},
	}, b.get(k).Collections)
}

// testManyCollectionChangesInOneWrite: a write that binds or drops hundreds of entries, across
// collections (a backend may send them in multi-row statements), changes exactly those.
func testManyCollectionChangesInOneWrite(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	want := map[string]string{}
	entry := func(collection string, i int, value string) persistence.CollectionEntry {
		want[collection+"/"+fmt.Sprint(i)] = value
		return persistence.CollectionEntry{Collection: collection, Key: fmt.Sprint(i), Value: []byte(value)}
	}
	w := b.create(k)
	for i := range 150 {
		w.CollectionPuts = append(w.CollectionPuts, entry("bound", i, "v1"))
	}
	for i := range 20 {
		w.CollectionPuts = append(w.CollectionPuts, entry("other", i, "v1"))
	}
	b.mustWrite(w)

	u := b.update(k, 1)
	for i := 100; i < 230; i++ { // 50 replaced, 80 new
		u.CollectionPuts = append(u.CollectionPuts, entry("bound", i, "v2"))
	}
	drop := func(collection string, from, to int) {
		for i := from; i < to; i++ {
			u.CollectionDeletes = append(u.CollectionDeletes, persistence.CollectionEntryKey{Collection: collection, Key: fmt.Sprint(i)})
			delete(want, collection+"/"+fmt.Sprint(i))
		}
	}
	drop("bound", 0, 70)
	drop("other", 0, 5)
	drop("bound", 70, 90)
	drop("other", 1000, 1070) // not there: not an error
	b.mustWrite(u)

	got := map[string]string{}
	for _, e := range b.get(k).Collections {
		got[e.Collection+"/"+e.Key] = string(e.Value)
	}
	require.Equal(t, want, got)
}

func testDeleteRemovesEverything(t *testing.T, b *bundle) {
	doomed, survivor := key("doomed", "run-1"), key("survivor", "run-1")
	var writes []*persistence.ExecutionWrite
	for i, k := range []persistence.ExecutionKey{doomed, survivor} {
		w := b.create(k)
		w.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte(k.BusinessID)}}
		id := int64(i * 10)
		w.TimerTasks = []*persistence.TimerTask{
			b.timer(k, id+1, baseTime, 1, true), b.timer(k, id+2, baseTime.Add(time.Second), 2, false),
		}
		w.OutboundTasks = []*persistence.OutboundTask{b.outbound(k, id+3, "d")}
		writes = append(writes, w)
	}
	b.mustWrite(writes...)

	b.mustWrite(b.del(doomed, 1))

	b.requireNotFound(doomed)
	_, err := b.store.GetCurrentExecution(b.ctx, b.shardID, doomed.CurrentKey())
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, []int64{11, 12}, timerIDs(b.allTimers()))
	require.Equal(t, []int64{13}, outboundIDs(b.allOutbound()))
	require.Len(t, b.get(survivor).Collections, 1)
	require.Equal(t, "run-1", b.current(survivor.CurrentKey()).RunID)

	// The business ID is free again, and the old run's collections do not come back.
	b.mustWrite(b.create(doomed))
	require.Empty(t, b.get(doomed).Collections)
}

func testDeleteKeepsNewerCurrentRun(t *testing.T, b *bundle) {
	run1, run2 := key("worker-1", "run-1"), key("worker-1", "run-2")
	b.mustWrite(b.create(run1))
	next := b.create(run2)
	next.ExpectedCurrentRunID = "run-1"
	b.mustWrite(next)

	b.mustWrite(b.del(run1, 1))
	b.requireNotFound(run1)
	require.Equal(t, "run-2", b.current(run1.CurrentKey()).RunID)
}

func testDeleteWithStaleVersionIsRefused(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	b.mustWrite(b.update(k, 1))
	err := b.write(b.del(k, 1))[0]
	var cf *persistence.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.Equal(t, int64(2), cf.ActualVersion)
	require.Equal(t, int64(2), b.get(k).DBVersion)

	err = b.write(b.del(key("ghost", "run-1"), 1))[0]
	var nf *persistence.NotFoundError
	require.ErrorAs(t, err, &nf)
}

func (b *bundle) listAll(req persistence.ListExecutionsRequest) []persistence.ExecutionKey {
	b.t.Helper()
	var keys []persistence.ExecutionKey
	for pages := 0; ; pages++ {
		require.Less(b.t, pages, 1000, "paging does not terminate")
		resp, err := b.store.ListExecutions(b.ctx, req)
		require.NoError(b.t, err)
		require.LessOrEqual(b.t, len(resp.Executions), req.PageSize)
		for _, rec := range resp.Executions {
			require.Nil(b.t, rec.Collections, "lists do not carry collections")
			keys = append(keys, rec.Key)
		}
		if resp.NextPageToken == nil {
			return keys
		}
		require.NotEmpty(b.t, resp.Executions, "a page with a next token is not empty")
		req.NextPageToken = resp.NextPageToken
	}
}

func sortKeys(keys []persistence.ExecutionKey) {
	slices.SortFunc(keys, func(a, b persistence.ExecutionKey) int {
		if c := compareStrings(a.BusinessID, b.BusinessID); c != 0 {
			return c
		}
		return compareStrings(a.RunID, b.RunID)
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testListPaginatesEveryExecutionOnce(t *testing.T, b *bundle) {
	var want []persistence.ExecutionKey
	var writes []*persistence.ExecutionWrite
	for i := range 23 {
		// Business IDs chosen so byte order and numeric order differ; some have two runs.
		k := key(fmt.Sprintf("worker-%d", i), "run-a")
		writes = append(writes, b.create(k))
		want = append(want, k)
		if i%5 == 0 {
			k2 := key(k.BusinessID, "run-b")
			w := b.create(k2)
			w.ExpectedCurrentRunID = "run-a"
			writes = append(writes, w)
			want = append(want, k2)
		}
	}
	// Same namespace, other archetype; other namespace, same archetype: never listed.
	otherArchetype := key("worker-x", "run-a")
	otherArchetype.ArchetypeID = testArchetype + 1
	otherNamespace := key("worker-y", "run-a")
	otherNamespace.NamespaceID = "ns-other"
	writes = append(writes, b.create(otherArchetype), b.create(otherNamespace))
	b.mustWrite(writes...)
	sortKeys(want)

	req := persistence.ListExecutionsRequest{NamespaceID: testNamespace, ArchetypeID: testArchetype}
	for _, pageSize := range []int{1, 4, 7, len(want), len(want) + 1, 1000} {
		req.PageSize = pageSize
		require.Equal(t, want, b.listAll(req), "page size %d", pageSize)
	}
	n, err := b.store.CountExecutions(b.ctx, req)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)

	resp, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: "ns-empty", ArchetypeID: testArchetype, PageSize: 10,
	})
	require.NoError(t, err)
	require.Empty(t, resp.Executions)
	require.Nil(t, resp.NextPageToken)

	// A page's records carry the stored row.
	resp, err = b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, PageSize: 1,
	})
	require.NoError(t, err)
	rec := b.get(resp.Executions[0].Key)
	rec.Collections = nil
	require.Equal(t, rec, resp.Executions[0])
}

func testListPagingSurvivesConcurrentCreates(t *testing.T, b *bundle) {
	var writes []*persistence.ExecutionWrite
	for i := range 10 {
		writes = append(writes, b.create(key(fmt.Sprintf("b-%02d", i*2), "run-1")))
	}
	b.mustWrite(writes...)

	req := persistence.ListExecutionsRequest{NamespaceID: testNamespace, ArchetypeID: testArchetype, PageSize: 3}
	resp, err := b.store.ListExecutions(b.ctx, req)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, r := range resp.Executions {
		seen[r.Key.BusinessID]++
	}
	// Executions created before and after the cursor between pages: no existing one is
	// skipped or repeated.
	b.mustWrite(b.create(key("a-first", "run-1")), b.create(key("b-05", "run-1")), b.create(key("b-01", "run-1")))
	req.NextPageToken = resp.NextPageToken
	for _, k := range b.listAll(req) {
		seen[k.BusinessID]++
	}
	for i := range 10 {
		require.Equal(t, 1, seen[fmt.Sprintf("b-%02d", i*2)], "b-%02d", i*2)
	}
	require.Zero(t, seen["a-first"])
	require.Equal(t, 1, seen["b-05"])
}

func testListFiltersByIndexedFields(t *testing.T, b *bundle) {
	type row struct {
		bid, status, queue string
	}
	rows := []row{
		{"w-1", "RUNNING", "q1"}, {"w-2", "RUNNING", "q2"}, {"w-3", "SHUTDOWN", "q1"},
		{"w-4", "RUNNING", "q1"}, {"w-5", "", ""}, {"w-6", "SHUTDOWN", "q2"},
	}
	var writes []*persistence.ExecutionWrite
	for _, r := range rows {
		w := b.create(key(r.bid, "run-1"))
		w.Indexed = persistence.IndexedFields{Status: r.status, TaskQueue: r.queue}
		writes = append(writes, w)
	}
	b.mustWrite(writes...)

	cases := []struct {
		status, queue string
		want          []string
	}{
		{"", "", []string{"w-1", "w-2", "w-3", "w-4", "w-5", "w-6"}},
		{"RUNNING", "", []string{"w-1", "w-2", "w-4"}},
		{"", "q1", []string{"w-1", "w-3", "w-4"}},
		{"SHUTDOWN", "q2", []string{"w-6"}},
		{"RUNNING", "q3", nil},
	}
	for _, tc := range cases {
		req := persistence.ListExecutionsRequest{
			NamespaceID: testNamespace, ArchetypeID: testArchetype, Status: tc.status, TaskQueue: tc.queue, PageSize: 2,
		}
		var got []string
		for _, k := range b.listAll(req) {
			got = append(got, k.BusinessID)
		}
		require.Equal(t, tc.want, got, "status %q queue %q", tc.status, tc.queue)
		n, err := b.store.CountExecutions(b.ctx, req)
		require.NoError(t, err)
		require.Equal(t, int64(len(tc.want)), n, "count, status %q queue %q", tc.status, tc.queue)
	}

	// Filters see updates of the indexed fields.
	u := b.update(key("w-1", "run-1"), 1)
	u.Indexed = persistence.IndexedFields{Status: "SHUTDOWN", TaskQueue: "q1"}
	b.mustWrite(u)
	n, err := b.store.CountExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Status: "RUNNING",
	})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	// A writer that says the indexed fields did not change (PrevIndexed == Indexed) keeps them
	// as they are; one whose PrevIndexed differs from Indexed writes the new values.
	same := persistence.IndexedFields{Status: "SHUTDOWN", TaskQueue: "q1"}
	u = b.update(key("w-1", "run-1"), 2)
	u.Indexed, u.PrevIndexed = same, &same
	b.mustWrite(u)
	count := func(status, queue string) int64 {
		n, err := b.store.CountExecutions(b.ctx, persistence.ListExecutionsRequest{
			NamespaceID: testNamespace, ArchetypeID: testArchetype, Status: status, TaskQueue: queue,
		})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, int64(3), count("SHUTDOWN", ""), "w-1, w-3, w-6")
	u = b.update(key("w-1", "run-1"), 3)
	u.Indexed, u.PrevIndexed = persistence.IndexedFields{Status: "RUNNING", TaskQueue: "q2"}, &same
	b.mustWrite(u)
	require.Equal(t, int64(2), count("SHUTDOWN", ""))
	require.Equal(t, int64(3), count("", "q2"), "w-1, w-2, w-6")
	record, err := b.store.GetExecution(b.ctx, b.shardID, key("w-1", "run-1"))
	require.NoError(t, err)
	require.Equal(t, persistence.IndexedFields{Status: "RUNNING", TaskQueue: "q2"}, record.Indexed)
}

func testClusterMetadataFixesShardCount(t *testing.T, b *bundle) {
	n, err := b.store.InitClusterMetadata(b.ctx, 16)
	require.NoError(t, err)
	require.Equal(t, int32(16), n)
	n, err = b.store.InitClusterMetadata(b.ctx, 32)
	require.NoError(t, err)
	require.Equal(t, int32(16), n, "the first shard count sticks")
	n, err = b.store.InitClusterMetadata(b.ctx, 16)
	require.NoError(t, err)
	require.Equal(t, int32(16), n)
}

// testConcurrentBatchesAreSerializable has writers race read-modify-write increments on shared
// counters, each retrying on ConditionFailedError. If two batches could both apply an update
// from the same version, increments would be lost.
func testConcurrentBatchesAreSerializable(t *testing.T, b *bundle) {
	const writers, incrementsPerWriter, counters = 6, 15, 2
	keys := make([]persistence.ExecutionKey, counters)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("counter-%d", i), "run-1")
		w := b.create(keys[i])
		w.State = []byte("0")
		b.mustWrite(w)
	}

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- incrementCounters(b, keys, g, incrementsPerWriter)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	total := 0
	for _, k := range keys {
		rec := b.get(k)
		var n int
		_, err := fmt.Sscan(string(rec.State), &n)
		require.NoError(t, err)
		require.Equal(t, int64(n+1), rec.DBVersion, "every version step is one increment")
		require.Len(t, rec.Collections, n, "every increment's collection put is kept")
		total += n
	}
	require.Equal(t, writers*incrementsPerWriter, total)
}

func incrementCounters(b *bundle, keys []persistence.ExecutionKey, writer, increments int) error {
	for i := 0; i < increments; i++ {
		k := keys[(writer+i)%len(keys)]
		for attempt := 0; ; attempt++ {
			if attempt > 1000 {
				return fmt.Errorf("writer %d: increment %d did not land", writer, i)
			}
			rec, err := b.store.GetExecution(b.ctx, b.shardID, k)
			if err != nil {
				return err
			}
			var n int
			if _, err := fmt.Sscan(string(rec.State), &n); err != nil {
				return err
			}
			w := b.update(k, rec.DBVersion)
			w.State = []byte(fmt.Sprint(n + 1))
			w.CollectionPuts = []persistence.CollectionEntry{{Collection: "inc", Key: fmt.Sprintf("%d-%d", writer, i), Value: []byte("x")}}
			results, err := b.store.WriteBatch(b.ctx, []*persistence.ExecutionWrite{w})
			if err != nil {
				return err
			}
			var cf *persistence.ConditionFailedError
			if errors.As(results[0], &cf) {
				continue
			}
			if results[0] != nil {
				return results[0]
			}
			break
		}
	}
	return nil
}

func testTimePrecisionRoundTrips(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	tokyo := time.FixedZone("UTC+9", 9*60*60)
	times := []time.Time{
		time.Date(2025, 3, 1, 21, 0, 0, 1, tokyo),            // nanosecond, non-UTC zone
		time.Date(2025, 3, 1, 12, 0, 0, 999999999, time.UTC), // last nanosecond of a second
		time.Date(1999, 12, 31, 23, 59, 59, 500, time.UTC),   // before the epoch of most tests
		time.Date(2200, 1, 1, 0, 0, 0, 7, time.UTC),          // far future
	}
	w := b.create(k)
	for i, at := range times {
		w.TimerTasks = append(w.TimerTasks, b.timer(k, int64(i+1), at, 1, false))
		o := b.outbound(k, int64(i+1), "d")
		o.CreatedTime = at
		w.OutboundTasks = append(w.OutboundTasks, o)
	}
	b.mustWrite(w)

	timers, err := b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, Before: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), PageSize: 100,
	})
	require.NoError(t, err)
	require.Len(t, timers, len(times))
	byID := map[int64]time.Time{}
	for _, tt := range timers {
		require.Equal(t, time.UTC, tt.VisibilityTime.Location(), "times come back in UTC")
		byID[tt.TaskID] = tt.VisibilityTime
	}
	for i, at := range times {
		got := byID[int64(i+1)]
		require.True(t, at.Equal(got), "timer %d: wrote %s, read %s", i+1, at.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano))
		require.Equal(t, at.UTC(), got)
	}
	for _, o := range b.allOutbound() {
		require.Equal(t, times[o.TaskID-1].UTC(), o.CreatedTime)
	}

	// A one-nanosecond difference is visible to the After and Before bounds.
	page, err := b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, Before: times[0].Add(time.Nanosecond), PageSize: 100,
	})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 1}, timerIDs(page))
	page, err = b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: b.shardID, Before: times[0], PageSize: 100,
	})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, timerIDs(page))
}

func testRespectsContextCancellation(t *testing.T, b *bundle) {
	k := key("worker-1", "run-1")
	b.mustWrite(b.create(k))
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()

	_, err := b.store.WriteBatch(ctx, []*persistence.ExecutionWrite{b.update(k, 1)})
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.store.GetExecution(ctx, b.shardID, k)
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.store.ListExecutions(ctx, persistence.ListExecutionsRequest{NamespaceID: testNamespace, ArchetypeID: testArchetype, PageSize: 1})
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.store.AcquireShard(ctx, b.shardID, "host-b")
	require.ErrorIs(t, err, context.Canceled)

	require.Equal(t, int64(1), b.get(k).DBVersion, "the cancelled write did not apply")
	info, err := b.store.GetShard(b.ctx, b.shardID)
	require.NoError(t, err)
	require.Equal(t, b.rangeID, info.RangeID)
}

// testFenceFailsOnlyItsShardsWrites: in a batch over two shards, one of which another host
// took, only the taken shard's writes are fenced.
func testFenceFailsOnlyItsShardsWrites(t *testing.T, b *bundle) {
	otherShard := b.shardID + 1
	other, err := b.store.AcquireShard(b.ctx, otherShard, "host-a")
	require.NoError(t, err)
	onOther := func(w *persistence.ExecutionWrite) *persistence.ExecutionWrite {
		w.ShardID, w.RangeID = otherShard, other.RangeID
		for _, task := range w.TimerTasks {
			task.ShardID = otherShard
		}
		return w
	}
	taken := key("worker-taken", "run-1")
	kept := key("worker-kept", "run-1")
	b.mustWrite(b.create(taken), onOther(b.create(kept)))

	stolen, err := b.store.AcquireShard(b.ctx, b.shardID, "host-b")
	require.NoError(t, err)

	keptUpdate := b.update(kept, 1)
	keptUpdate.TimerTasks = []*persistence.TimerTask{b.timer(kept, 1, baseTime, 1, false)}
	keptUpdate = onOther(keptUpdate)
	takenUpdate := b.update(taken, 1)
	takenUpdate.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	results := b.write(takenUpdate, keptUpdate, b.create(key("worker-new", "run-1")), onOther(b.create(key("worker-new-2", "run-1"))))
	var lost *persistence.ShardOwnershipLostError
	require.ErrorAs(t, results[0], &lost)
	require.Equal(t, persistence.ShardOwnershipLostError{ShardID: b.shardID, RangeID: b.rangeID, StoredRangeID: stolen.RangeID}, *lost)
	require.NoError(t, results[1])
	require.ErrorAs(t, results[2], &lost)
	require.NoError(t, results[3])

	rec := b.get(taken)
	require.Equal(t, int64(1), rec.DBVersion)
	require.Empty(t, rec.Collections)
	b.requireNotFound(key("worker-new", "run-1"))
	rec, err = b.store.GetExecution(b.ctx, otherShard, kept)
	require.NoError(t, err)
	require.Equal(t, int64(2), rec.DBVersion)
	timers, err := b.store.GetTimerTasks(b.ctx, persistence.GetTimerTasksRequest{
		ShardID: otherShard, Before: baseTime.Add(time.Hour), PageSize: 10,
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, timerIDs(timers))
	_, err = b.store.GetExecution(b.ctx, otherShard, key("worker-new-2", "run-1"))
	require.NoError(t, err)
}

// testDeleteThenCreateInOneBatch: a later write sees an earlier one's delete, including the
// freed business ID.
func testDeleteThenCreateInOneBatch(t *testing.T, b *bundle) {
	run1 := key("worker-1", "run-1")
	run2 := key("worker-1", "run-2")
	w := b.create(run1)
	w.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
	w.TimerTasks = []*persistence.TimerTask{b.timer(run1, 1, baseTime, 1, true)}
	b.mustWrite(w)

	create := b.create(run2)
	create.TimerTasks = []*persistence.TimerTask{b.timer(run2, 2, baseTime, 1, true)}
	b.mustWrite(b.del(run1, 1), create, b.update(run2, 1))

	b.requireNotFound(run1)
	rec := b.get(run2)
	require.Equal(t, int64(2), rec.DBVersion)
	require.Empty(t, rec.Collections)
	require.Equal(t, "run-2", b.current(run1.CurrentKey()).RunID)
	require.Equal(t, []int64{2}, timerIDs(b.allTimers()))
}

// testEveryKindOfFailureInOneBatch: each check a write can fail, in one batch between writes
// that succeed, fails only its own write, with its own error.
func testEveryKindOfFailureInOneBatch(t *testing.T, b *bundle) {
	existing := key("existing", "run-1")
	b.mustWrite(b.create(existing))

	fenced := b.create(key("fenced", "run-1"))
	fenced.RangeID = b.rangeID + 1
	conflict := b.create(key("existing", "run-2"))
	again := b.create(existing)
	again.ExpectedCurrentRunID = "run-1"
	stale := b.update(existing, 5)
	missing := b.update(key("ghost", "run-1"), 1)
	staleDelete := b.del(existing, 5)
	malformed := b.update(existing, 1)
	malformed.NextDBVersion = 1

	var ok []*persistence.ExecutionWrite
	for i := range 6 {
		w := b.create(key(fmt.Sprintf("ok-%d", i), "run-1"))
		w.CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
		w.OutboundTasks = []*persistence.OutboundTask{b.outbound(w.Key, int64(i+1), "d")}
		ok = append(ok, w)
	}
	update := b.update(existing, 1)
	update.TimerTasks = []*persistence.TimerTask{b.timer(existing, 1, baseTime, 1, false)}

	results := b.write(ok[0], fenced, ok[1], conflict, ok[2], again, update, stale, ok[3], missing, ok[4], staleDelete, ok[5], malformed)
	for _, i := range []int{0, 2, 4, 6, 8, 10, 12} {
		require.NoError(t, results[i], "write %d", i)
	}
	var lost *persistence.ShardOwnershipLostError
	require.ErrorAs(t, results[1], &lost)
	var ce *persistence.CurrentExecutionConflictError
	require.ErrorAs(t, results[3], &ce)
	require.Equal(t, "run-1", ce.CurrentRunID)
	var exists *persistence.ExecutionAlreadyExistsError
	require.ErrorAs(t, results[5], &exists)
	var cf *persistence.ConditionFailedError
	require.ErrorAs(t, results[7], &cf)
	require.Equal(t, int64(2), cf.ActualVersion, "the update before it in the batch moved the version")
	var nf *persistence.NotFoundError
	require.ErrorAs(t, results[9], &nf)
	require.ErrorAs(t, results[11], &cf)
	require.Error(t, results[13])

	require.Equal(t, int64(2), b.get(existing).DBVersion)
	require.Equal(t, "run-1", b.current(existing.CurrentKey()).RunID)
	b.requireNotFound(key("fenced", "run-1"))
	b.requireNotFound(key("existing", "run-2"))
	for _, w := range ok {
		require.Len(t, b.get(w.Key).Collections, 1)
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, outboundIDs(b.allOutbound()))
	require.Equal(t, []int64{1}, timerIDs(b.allTimers()))
}

// testLargeBatchWithOneFailure: a batch of the group committer's default size, one write of
// which fails late in the batch; the rest commit, each with its collection entry and task.
func testLargeBatchWithOneFailure(t *testing.T, b *bundle) {
	const n = 256
	keys := make([]persistence.ExecutionKey, n)
	creates := make([]*persistence.ExecutionWrite, n)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("worker-%03d", i), "run-1")
		creates[i] = b.create(keys[i])
	}
	b.mustWrite(creates...)

	updates := make([]*persistence.ExecutionWrite, n)
	for i, k := range keys {
		updates[i] = b.update(k, 1)
		updates[i].CollectionPuts = []persistence.CollectionEntry{{Collection: "c", Key: "k", Value: []byte("v")}}
		updates[i].TimerTasks = []*persistence.TimerTask{b.timer(k, int64(i+1), baseTime, 1, true)}
	}
	const failing = n - 3
	updates[failing].PrevDBVersion, updates[failing].NextDBVersion = 7, 8
	results := b.write(updates...)
	for i, err := range results {
		if i == failing {
			var cf *persistence.ConditionFailedError
			require.ErrorAs(t, err, &cf)
			continue
		}
		require.NoError(t, err, "write %d", i)
	}
	require.Len(t, b.allTimers(), n-1)
	require.Empty(t, b.get(keys[failing]).Collections)
	require.Equal(t, int64(1), b.get(keys[failing]).DBVersion)
	require.Equal(t, int64(2), b.get(keys[0]).DBVersion)
	require.Len(t, b.get(keys[n-1]).Collections, 1)
}
