package dynamicconfig

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vigilhq/vigil/common/clock"
)

const sampleFile = `
matching.InactiveWorkerCleanupDelay:
  - value: 5m
    constraints:
      namespace: fast-ns
  - value: 60m
worker.maxBindingsPerWorker:
  - value: 5000
history.groupCommitMaxWait:
  - value: 2ms
`

type fileClientBundle struct {
	path   string
	clock  *clock.FakeTimeSource
	client *FileClient
	logs   *observer.ObservedLogs
	scope  tally.TestScope
	coll   *Collection
}

func setupFileClient(t *testing.T, content string) *fileClientBundle {
	t.Helper()
	b := &fileClientBundle{
		path:  filepath.Join(t.TempDir(), "dynamicconfig.yaml"),
		clock: clock.NewFakeTimeSource(),
		scope: tally.NewTestScope("", nil),
	}
	writeFile(t, b.path, content)
	core, logs := observer.New(zapcore.DebugLevel)
	b.logs = logs
	client, err := NewFileClient(FileClientConfig{Filepath: b.path, PollInterval: time.Second},
		zap.New(core), b.clock, WithMetricsScope(b.scope))
	require.NoError(t, err)
	client.testSignals.init()
	t.Cleanup(client.Stop)
	b.client = client
	b.coll = NewCollection(client, zap.NewNop())
	return b
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func waitSignal[T any](t *testing.T, s testSignal[T]) T {
	t.Helper()
	select {
	case v := <-s:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the poll loop")
		var zero T
		return zero
	}
}

func TestFileClientLoad(t *testing.T) {
	t.Parallel()

	t.Run("ServesValuesWithConstraints", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		cleanup := InactiveWorkerCleanupDelay.Get(b.coll)

		require.Equal(t, 5*time.Minute, cleanup("fast-ns"))
		require.Equal(t, 60*time.Minute, cleanup("other-ns"))
		require.Equal(t, 5000, MaxBindingsPerWorker.Get(b.coll)("any"))
		require.Equal(t, 2*time.Millisecond, GroupCommitMaxWait.Get(b.coll)())
		require.Equal(t, 3*time.Minute, DefaultLeaseDuration.Get(b.coll)("any"), "absent keys use the default")
	})

	t.Run("KeysAreCaseInsensitive", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, "MATCHING.inactiveworkercleanupdelay:\n  - value: 90\n")
		require.Equal(t, 90*time.Second, InactiveWorkerCleanupDelay.Get(b.coll)("ns"))
	})

	t.Run("EmptyFileIsValid", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, "# nothing configured yet\n")
		require.Equal(t, 256, GroupCommitMaxBatchSize.Get(b.coll)())
	})

	t.Run("UnknownKeysAreKeptAndLoggedOnce", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile+"worker.maxBindingPerWorker:\n  - value: 1\n")
		require.Len(t, b.client.GetValue("worker.maxBindingPerWorker"), 1)
		require.Equal(t, 1, b.logs.FilterField(zap.String("key", "worker.maxBindingPerWorker")).Len())

		writeFile(t, b.path, sampleFile+"worker.maxBindingPerWorker:\n  - value: 2\n")
		require.NoError(t, b.client.Reload())
		require.Equal(t, 1, b.logs.FilterField(zap.String("key", "worker.maxBindingPerWorker")).Len())
	})
}

func TestNewFileClientErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		content  string
		interval time.Duration
		noFile   bool
		wantErr  string
	}{
		{name: "MissingFile", noFile: true, wantErr: "no such file"},
		{name: "InvalidYAML", content: "key: [", wantErr: "yaml"},
		{name: "ScalarInsteadOfList", content: "worker.maxBindingsPerWorker: 5\n", wantErr: "cannot unmarshal"},
		{name: "MissingValue", content: "worker.maxBindingsPerWorker:\n  - constraints:\n      namespace: a\n", wantErr: `missing "value"`},
		{name: "MisspelledField", content: "worker.maxBindingsPerWorker:\n  - vaule: 5\n", wantErr: "vaule"},
		{name: "UnsupportedConstraint", content: "worker.maxBindingsPerWorker:\n  - value: 5\n    constraints:\n      taskQueueName: q\n", wantErr: "taskQueueName"},
		{name: "EmptyNamespaceConstraint", content: "worker.maxBindingsPerWorker:\n  - value: 5\n    constraints:\n      namespace: \"\"\n", wantErr: "empty namespace"},
		{name: "KeysDifferingOnlyInCase", content: "a.b:\n  - value: 1\nA.B:\n  - value: 2\n", wantErr: "differ only in case"},
		{name: "WrongTypeForADuration", content: "matching.InactiveWorkerCleanupDelay:\n  - value: 5m\n  - value: banana\n",
			wantErr: `key "matching.InactiveWorkerCleanupDelay", item 2 (line 3): value banana`},
		{name: "WrongTypeForAnInt", content: "worker.maxBindingsPerWorker:\n  - value: lots\n", wantErr: `"worker.maxBindingsPerWorker", item 1 (line 2)`},
		{name: "PollIntervalBelowMinimum", content: sampleFile, interval: 100 * time.Millisecond, wantErr: "below the minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "dc.yaml")
			if !tt.noFile {
				writeFile(t, path, tt.content)
			}
			_, err := NewFileClient(FileClientConfig{Filepath: path, PollInterval: tt.interval}, zap.NewNop(), clock.NewFakeTimeSource())
			require.ErrorContains(t, err, tt.wantErr)
		})
	}

	t.Run("DefaultsPollInterval", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "dc.yaml")
		writeFile(t, path, sampleFile)
		c, err := NewFileClient(FileClientConfig{Filepath: path}, nil, nil)
		require.NoError(t, err)
		require.Equal(t, FileClientPollIntervalDefault, c.config.PollInterval)
	})
}

func TestFileClientReload(t *testing.T) {
	t.Parallel()

	t.Run("PicksUpAnEdit", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		get := MaxBindingsPerWorker.Get(b.coll)
		require.Equal(t, 5000, get("ns"))

		writeFile(t, b.path, "worker.maxBindingsPerWorker:\n  - value: 7000\n")
		require.NoError(t, b.client.Reload())
		require.Equal(t, 7000, get("ns"))
		require.Equal(t, 60*time.Minute, InactiveWorkerCleanupDelay.Get(b.coll)("fast-ns"), "removed keys fall back to the default")
	})

	t.Run("BadFileKeepsPreviousValues", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		get := InactiveWorkerCleanupDelay.Get(b.coll)

		writeFile(t, b.path, "matching.InactiveWorkerCleanupDelay:\n  - value: 1m\n    constraints: {namespce: fast-ns}\n")
		require.ErrorContains(t, b.client.Reload(), "namespce")
		require.Equal(t, 5*time.Minute, get("fast-ns"))
		require.Equal(t, 60*time.Minute, get("other"))
		require.EqualValues(t, 1, b.client.ReloadFailures())
		require.EqualValues(t, 1, b.scope.Snapshot().Counters()["dynamicconfig_reload_errors+"].Value())
		require.Equal(t, 1, b.logs.FilterMessage("dynamic config file rejected, keeping the previous values").Len())

		// The same broken content is reported once, however often it is polled.
		require.Error(t, b.client.Reload())
		require.EqualValues(t, 1, b.client.ReloadFailures())

		writeFile(t, b.path, sampleFile)
		require.NoError(t, b.client.Reload())
		require.Equal(t, 5*time.Minute, get("fast-ns"))
	})

	t.Run("WrongTypeKeepsPreviousValues", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		get := InactiveWorkerCleanupDelay.Get(b.coll)
		writeFile(t, b.path, "matching.InactiveWorkerCleanupDelay:\n  - value: 1m\n    constraints:\n      namespace: fast-ns\n  - value: banana\nworker.maxBindingsPerWorker:\n  - value: 9\n")
		err := b.client.Reload()
		require.ErrorContains(t, err, `key "matching.InactiveWorkerCleanupDelay", item 2 (line 5): value banana`)
		// Rejected whole: neither the valid item of the same key nor the other key applies.
		require.Equal(t, 5*time.Minute, get("fast-ns"), "the previous value, not the default")
		require.Equal(t, 60*time.Minute, get("other"))
		require.Equal(t, 5000, MaxBindingsPerWorker.Get(b.coll)("ns"))
		rejected := b.logs.FilterMessage("dynamic config file rejected, keeping the previous values").All()
		require.Len(t, rejected, 1)
		require.Contains(t, rejected[0].ContextMap()["error"], "banana")
		require.Zero(t, b.logs.FilterMessage("dynamic config reloaded").Len())
	})

	t.Run("DeletedFileKeepsPreviousValues", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		require.NoError(t, os.Remove(b.path))
		require.Error(t, b.client.Reload())
		require.Equal(t, 5000, MaxBindingsPerWorker.Get(b.coll)("ns"))
		require.EqualValues(t, 1, b.client.ReloadFailures())
	})

	t.Run("UnchangedFileIsNotReparsed", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		require.NoError(t, b.client.Reload())
		require.Zero(t, b.logs.FilterMessage("dynamic config reloaded").Len())
	})
}

func TestFileClientPolling(t *testing.T) {
	t.Parallel()

	t.Run("ReloadsOnEachTick", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		get := MaxBindingsPerWorker.Get(b.coll)
		b.client.Start()
		waitSignal(t, b.client.testSignals.timerArmed)

		writeFile(t, b.path, "worker.maxBindingsPerWorker:\n  - value: 1234\n")
		b.clock.Advance(999 * time.Millisecond)
		require.Equal(t, 5000, get("ns"), "not polled before the interval")

		b.clock.Advance(time.Millisecond)
		require.NoError(t, waitSignal(t, b.client.testSignals.polled))
		require.Equal(t, 1234, get("ns"))

		waitSignal(t, b.client.testSignals.timerArmed)
		writeFile(t, b.path, "worker.maxBindingsPerWorker: oops\n")
		b.clock.Advance(time.Second)
		require.Error(t, waitSignal(t, b.client.testSignals.polled))
		require.Equal(t, 1234, get("ns"))
	})

	t.Run("StopLeavesNoGoroutineRunning", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		b.client.Start()
		waitSignal(t, b.client.testSignals.timerArmed)

		b.client.Stop()
		select {
		case <-b.client.doneCh:
		default:
			t.Fatal("Stop returned before the poll goroutine exited")
		}
		require.Zero(t, b.clock.PendingTimers(), "the poll timer is released")

		b.client.Stop() // idempotent
		b.client.Start()
		require.Zero(t, b.clock.PendingTimers(), "a stopped client does not start again")
	})

	t.Run("StopWithoutStart", func(t *testing.T) {
		t.Parallel()
		b := setupFileClient(t, sampleFile)
		b.client.Stop()
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		for range 50 {
			b := setupFileClient(t, sampleFile)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(b.client.Start)
				wg.Go(func() { _ = b.client.Reload() })
			}
			// FakeTimeSource.Advance is not atomic against itself: one goroutine moves the clock.
			wg.Go(func() {
				for range 4 {
					b.clock.Advance(time.Second)
				}
			})
			wg.Go(b.client.Stop)
			wg.Wait()
			b.client.Stop()
			require.Zero(t, b.clock.PendingTimers())
		}
	})
}
