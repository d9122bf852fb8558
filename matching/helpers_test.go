package matching

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vigilhq/vigil/common/clock"
)

const (
	testNS = "ns-1"
	testTQ = "tq-1"
	// eventTimeout only guards against a hung test; no test waits for it to pass.
	eventTimeout = 10 * time.Second
)

// testEnv is each test's setup bundle: a matcher on a fake clock, with its metrics, logs and
// hook signals.
type testEnv struct {
	t       *testing.T
	m       *Matcher
	ts      *clock.FakeTimeSource
	scope   tally.TestScope
	logs    *observer.ObservedLogs
	waiting chan string
	swept   chan struct{}
}

func newTestEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	ts := clock.NewFakeTimeSource()
	// Contexts carry wall-clock deadlines; starting the fake clock at the wall clock makes a
	// deadline of fake-now+d a real future deadline too, while the fake clock still decides
	// when the matcher answers.
	ts.Update(time.Now())
	e := &testEnv{
		t:       t,
		ts:      ts,
		scope:   tally.NewTestScope("", nil),
		waiting: make(chan string, 1024),
		swept:   make(chan struct{}, 1024),
	}
	core, logs := observer.New(zapcore.DebugLevel)
	e.logs = logs
	opts.TestHooks = &TestHooks{
		PollWaiting: func(q string) { e.waiting <- q },
		Swept:       func() { e.swept <- struct{}{} },
	}
	e.m = New(ts, opts, zap.New(core), e.scope)
	t.Cleanup(e.m.Stop)
	return e
}

type pollResult struct {
	ref ActivityTaskRef
	ok  bool
	err error
}

// poll runs PollActivityTask in its own goroutine.
func (e *testEnv) poll(ctx context.Context, p ActivityPoll) <-chan pollResult {
	ch := make(chan pollResult, 1)
	go func() {
		ref, ok, err := e.m.PollActivityTask(ctx, p)
		ch <- pollResult{ref, ok, err}
	}()
	return ch
}

// waitingPoll starts a poll and returns once it is queued as a waiter with its timer armed.
func (e *testEnv) waitingPoll(ctx context.Context, p ActivityPoll) <-chan pollResult {
	e.t.Helper()
	ch := e.poll(ctx, p)
	e.awaitWaiting()
	return ch
}

func (e *testEnv) awaitWaiting() {
	e.t.Helper()
	select {
	case <-e.waiting:
	case <-time.After(eventTimeout):
		e.t.Fatal("no poll started waiting")
	}
}

func (e *testEnv) awaitSwept() {
	e.t.Helper()
	select {
	case <-e.swept:
	case <-time.After(eventTimeout):
		e.t.Fatal("no sweep ran")
	}
}

// pollNow polls with a deadline inside the margin, so it answers at once: a task if one is
// queued, else empty.
func (e *testEnv) pollNow(p ActivityPoll) (ActivityTaskRef, bool) {
	e.t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), e.ts.Now().Add(e.m.opts.PollDeadlineMargin/2))
	defer cancel()
	ref, ok, err := e.m.PollActivityTask(ctx, p)
	require.NoError(e.t, err)
	return ref, ok
}

func (e *testEnv) counter(name string) int64 {
	var n int64
	for _, c := range e.scope.Snapshot().Counters() {
		if c.Name() == name {
			n += c.Value()
		}
	}
	return n
}

func (e *testEnv) gauge(name string) float64 {
	for _, g := range e.scope.Snapshot().Gauges() {
		if g.Name() == name {
			return g.Value()
		}
	}
	return 0
}

func (e *testEnv) backlogLen(ns, tq string) int {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if q := e.m.activityQueues[queueKey{ns, tq}]; q != nil {
		return q.backlog.Len()
	}
	return 0
}

// queueCounts snapshots the matcher's queues; assertions run after the lock is released.
func (e *testEnv) queueCounts() (activityQueues []queueKey, commandQueues, idle int) {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	for k := range e.m.activityQueues {
		activityQueues = append(activityQueues, k)
	}
	return activityQueues, len(e.m.commandQueues), e.m.idle.Len()
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventTimeout):
		t.Fatal("nothing received")
		var zero T
		return zero
	}
}

func requireNotReceived[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected receive: %+v", v)
	default:
	}
}

func activityPoll(worker string) ActivityPoll {
	return ActivityPoll{NamespaceID: testNS, TaskQueue: testTQ, Identity: "id@" + worker, WorkerInstanceKey: worker}
}

var baseTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func task(id string, stamp int64, scheduledOffset time.Duration) ActivityTaskRef {
	return ActivityTaskRef{
		NamespaceID: testNS, TaskQueue: testTQ, ActivityID: id, RunID: "run-" + id,
		Stamp: stamp, ScheduledTime: baseTime.Add(scheduledOffset),
	}
}

func taskN(i int) ActivityTaskRef { return task(fmt.Sprintf("a-%d", i), 1, time.Duration(i)) }
