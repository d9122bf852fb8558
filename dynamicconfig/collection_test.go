package dynamicconfig

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

var (
	testGlobalInt         = NewGlobalIntSetting("test.globalInt", 7, "test")
	testNamespaceDuration = NewNamespaceDurationSetting("test.namespaceDuration", time.Minute, "test")
	testNamespaceBool     = NewNamespaceBoolSetting("test.namespaceBool", false, "test")
	testGlobalString      = NewGlobalStringSetting("test.globalString", "default", "test")
	testGlobalFloat       = NewGlobalFloatSetting("test.globalFloat", 1.5, "test")
)

func TestNamespaceConstraints(t *testing.T) {
	t.Parallel()

	t.Run("OverrideAppliesOnlyToThatNamespace", func(t *testing.T) {
		t.Parallel()
		client := NewMemoryClient()
		client.OverrideNamespaceValue(testNamespaceDuration.Key(), "fast-ns", "5m")
		get := testNamespaceDuration.Get(NewCollection(client, zap.NewNop()))

		require.Equal(t, 5*time.Minute, get("fast-ns"))
		require.Equal(t, time.Minute, get("other-ns"))
		require.Equal(t, time.Minute, get(""))
	})

	t.Run("LookupByNamespaceIDDoesNotMatchNameConstraint", func(t *testing.T) {
		t.Parallel()
		// Constraints are written with namespace names; a caller passing the ID must not
		// silently get the override (nor should it match by accident).
		client := NewMemoryClient()
		client.OverrideNamespaceValue(testNamespaceDuration.Key(), "fast-ns", "5m")
		get := testNamespaceDuration.Get(NewCollection(client, zap.NewNop()))

		require.Equal(t, time.Minute, get("6a9b2e64-4e8f-4f4c-9b5e-0c5d2f3e1a77"))
		require.Equal(t, time.Minute, get("FAST-NS"), "namespace names are case-sensitive")
	})

	t.Run("NamespaceValueBeatsUnconstrainedWhateverTheOrder", func(t *testing.T) {
		t.Parallel()
		client := NewMemoryClient()
		client.OverrideNamespaceValue(testNamespaceDuration.Key(), "fast-ns", "5m")
		client.OverrideValue(testNamespaceDuration.Key(), "2h")
		get := testNamespaceDuration.Get(NewCollection(client, zap.NewNop()))

		require.Equal(t, 5*time.Minute, get("fast-ns"))
		require.Equal(t, 2*time.Hour, get("other-ns"))
	})

	t.Run("FirstValueWinsAmongEquals", func(t *testing.T) {
		t.Parallel()
		client := staticClient{testNamespaceBool.Key(): {
			{Value: true},
			{Value: false},
		}}
		require.True(t, testNamespaceBool.Get(NewCollection(client, zap.NewNop()))("any"))
	})

	t.Run("GlobalSettingIgnoresNamespaceConstrainedValues", func(t *testing.T) {
		t.Parallel()
		client := NewMemoryClient()
		client.OverrideNamespaceValue(testGlobalInt.Key(), "fast-ns", 99)
		require.Equal(t, 7, testGlobalInt.Get(NewCollection(client, zap.NewNop()))())
	})
}

func TestKeysAreCaseInsensitive(t *testing.T) {
	t.Parallel()

	client := NewMemoryClient()
	client.OverrideValue("TEST.GLOBALINT", 42)
	require.Equal(t, 42, testGlobalInt.Get(NewCollection(client, zap.NewNop()))())
	require.True(t, IsDeclared("Matching.inactiveWorkerCleanupDelay"))
}

func TestGetterReadsAtUseTime(t *testing.T) {
	t.Parallel()

	client := NewMemoryClient()
	get := testGlobalString.Get(NewCollection(client, zap.NewNop()))
	require.Equal(t, "default", get())

	cleanup := client.OverrideValue(testGlobalString.Key(), "first")
	require.Equal(t, "first", get())

	cleanupSecond := client.OverrideValue(testGlobalString.Key(), "second")
	require.Equal(t, "second", get(), "the newest override wins")

	cleanupSecond()
	require.Equal(t, "first", get())
	cleanup()
	require.Equal(t, "default", get())
}

func TestBadValueFallsBackToDefault(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsDefaultAndWarnsOncePerValue", func(t *testing.T) {
		t.Parallel()
		core, logs := observer.New(zapcore.WarnLevel)
		client := NewMemoryClient()
		client.OverrideValue(testGlobalInt.Key(), "many")
		get := testGlobalInt.Get(NewCollection(client, zap.New(core)))

		for range 3 {
			require.Equal(t, 7, get())
		}
		require.Equal(t, 1, logs.Len())
		entry := logs.All()[0]
		require.Equal(t, "test.globalInt", entry.ContextMap()["key"])
		require.Equal(t, "many", entry.ContextMap()["value"])

		client.OverrideValue(testGlobalInt.Key(), 1.5)
		require.Equal(t, 7, get())
		require.Equal(t, 2, logs.Len(), "a different bad value is reported again")
	})

	t.Run("FloatRejectsNonNumbers", func(t *testing.T) {
		t.Parallel()
		client := NewMemoryClient()
		client.OverrideValue(testGlobalFloat.Key(), true)
		require.InDelta(t, 1.5, testGlobalFloat.Get(NewCollection(client, zap.NewNop()))(), 0)
	})
}

func TestNoopCollectionServesDefaults(t *testing.T) {
	t.Parallel()

	c := NewNoopCollection()
	require.Equal(t, 60*time.Minute, InactiveWorkerCleanupDelay.Get(c)("default"))
	require.Equal(t, 256, GroupCommitMaxBatchSize.Get(c)())
}

func TestCollectionIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()

	client := NewMemoryClient()
	get := testNamespaceDuration.Get(NewCollection(client, zap.NewNop()))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					client.OverrideNamespaceValue(testNamespaceDuration.Key(), "ns", "bad")()
				} else {
					get("ns")
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, time.Minute, get("ns"))
}

// staticClient serves fixed values, in the order given.
type staticClient map[Key][]ConstrainedValue

func (s staticClient) GetValue(key Key) []ConstrainedValue {
	for k, v := range s {
		if k.normalized() == key.normalized() {
			return v
		}
	}
	return nil
}
