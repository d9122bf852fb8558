package tag

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestFieldsUseStableKeys(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("event",
		WorkerID("w-1"),
		Namespace("default"),
		NamespaceID("ns-id"),
		ShardID(3),
		RangeID(7),
		BusinessID("b"),
		RunID("r"),
		Archetype("worker"),
		TaskType("LeaseExpiryTask"),
		TaskID(42),
		Destination("shard-9"),
		Attempt(2),
		Error(errors.New("boom")),
		Component("timer-queue"),
		Address("127.0.0.1:7233"),
		Key("matching.InactiveWorkerCleanupDelay"),
	)

	require.Equal(t, map[string]any{
		"worker-id":    "w-1",
		"namespace":    "default",
		"namespace-id": "ns-id",
		"shard-id":     int32(3),
		"range-id":     int64(7),
		"business-id":  "b",
		"run-id":       "r",
		"archetype":    "worker",
		"task-type":    "LeaseExpiryTask",
		"task-id":      int64(42),
		"destination":  "shard-9",
		"attempt":      int32(2),
		"error":        "boom",
		"component":    "timer-queue",
		"address":      "127.0.0.1:7233",
		"key":          "matching.InactiveWorkerCleanupDelay",
	}, logs.All()[0].ContextMap())
}

func TestNilErrorLogsNothing(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("event", Error(nil))
	require.Empty(t, logs.All()[0].ContextMap())
}
