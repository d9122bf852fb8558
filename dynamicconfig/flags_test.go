package dynamicconfig

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func TestParseKeyValueFlags(t *testing.T) {
	t.Parallel()

	t.Run("ParsesJSONScalars", func(t *testing.T) {
		t.Parallel()
		client, err := ParseKeyValueFlags([]string{
			`worker.maxBindingsPerWorker=5000`,
			`matching.InactiveWorkerCleanupDelay="5m"`,
			`frontend.namespaceRPS=2500.5`,
			`test.namespaceBool=true`,
		})
		require.NoError(t, err)
		c := NewCollection(client, zap.NewNop())
		require.Equal(t, 5000, MaxBindingsPerWorker.Get(c)("ns"))
		require.Equal(t, 5*time.Minute, InactiveWorkerCleanupDelay.Get(c)("ns"))
		require.InDelta(t, 2500.5, NamespaceRPS.Get(c)("ns"), 0)
		require.True(t, testNamespaceBool.Get(c)("ns"))
	})

	t.Run("LaterFlagWins", func(t *testing.T) {
		t.Parallel()
		client, err := ParseKeyValueFlags([]string{`history.groupCommitMaxBatchSize=1`, `HISTORY.groupCommitMaxBatchSize=2`})
		require.NoError(t, err)
		require.Equal(t, 2, GroupCommitMaxBatchSize.Get(NewCollection(client, zap.NewNop()))())
	})

	t.Run("ValueMayContainEquals", func(t *testing.T) {
		t.Parallel()
		client, err := ParseKeyValueFlags([]string{`test.globalString="a=b"`})
		require.NoError(t, err)
		require.Equal(t, "a=b", testGlobalString.Get(NewCollection(client, zap.NewNop()))())
	})

	errorTests := []struct {
		name    string
		flag    string
		wantErr string
	}{
		{name: "MissingEquals", flag: "worker.maxBindingsPerWorker", wantErr: "want KEY=JSON"},
		{name: "EmptyKey", flag: "=5", wantErr: `invalid key ""`},
		{name: "KeyWithSpace", flag: "a b=5", wantErr: `invalid key "a b"`},
		{name: "UnquotedString", flag: "matching.InactiveWorkerCleanupDelay=5m", wantErr: `strings must be JSON-quoted: matching.InactiveWorkerCleanupDelay='"5m"'`},
		{name: "EmptyValue", flag: "worker.maxBindingsPerWorker=", wantErr: "is not valid JSON"},
		{name: "TrailingData", flag: "worker.maxBindingsPerWorker=5 6", wantErr: "extra data"},
		{name: "Object", flag: `worker.maxBindingsPerWorker={"a":1}`, wantErr: "got an object"},
		{name: "Array", flag: `worker.maxBindingsPerWorker=[1]`, wantErr: "got an array"},
		{name: "Null", flag: `worker.maxBindingsPerWorker=null`, wantErr: "got null"},
	}
	for _, tt := range errorTests {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseKeyValueFlags([]string{"history.groupCommitMaxBatchSize=1", tt.flag})
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, err, tt.flag, "the error names the offending flag")
		})
	}
}

func TestOverlayClient(t *testing.T) {
	t.Parallel()

	t.Run("OverrideReplacesAllBaseValuesOfItsKey", func(t *testing.T) {
		t.Parallel()
		base := NewMemoryClient()
		base.OverrideNamespaceValue(InactiveWorkerCleanupDelay.Key(), "fast-ns", "5m")
		base.OverrideValue(MaxBindingsPerWorker.Key(), 10)
		overrides := NewMemoryClient()
		overrides.OverrideValue(InactiveWorkerCleanupDelay.Key(), "2h")

		c := NewCollection(NewOverlayClient(overrides, base), zap.NewNop())
		require.Equal(t, 2*time.Hour, InactiveWorkerCleanupDelay.Get(c)("fast-ns"))
		require.Equal(t, 10, MaxBindingsPerWorker.Get(c)("ns"), "keys without overrides come from base")
		require.Equal(t, 3*time.Minute, DefaultLeaseDuration.Get(c)("ns"))
	})

	t.Run("NilLayersAreSkipped", func(t *testing.T) {
		t.Parallel()
		base := NewMemoryClient()
		base.OverrideValue(GroupCommitMaxBatchSize.Key(), 3)
		c := NewCollection(NewOverlayClient(nil, base), zap.NewNop())
		require.Equal(t, 3, GroupCommitMaxBatchSize.Get(c)())
	})
}
