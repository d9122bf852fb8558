// Package tag holds the typed zap fields vigil logs with.
//
// Each constructor fixes the key for one fact, so a search for worker-id="..." finds every line
// about that worker whichever package wrote it. Keys are lowercase and dashed, and stable: dashboards
// and alerts depend on them.
package tag

import (
	"go.uber.org/zap"
)

// Keys of the fields below.
const (
	KeyWorkerID    = "worker-id"
	KeyNamespace   = "namespace"
	KeyNamespaceID = "namespace-id"
	KeyShardID     = "shard-id"
	KeyRangeID     = "range-id"
	KeyBusinessID  = "business-id"
	KeyRunID       = "run-id"
	KeyArchetype   = "archetype"
	KeyTaskType    = "task-type"
	KeyTaskID      = "task-id"
	KeyDestination = "destination"
	KeyAttempt     = "attempt"
	KeyError       = "error"
	KeyComponent   = "component"
	KeyAddress     = "address"
	KeyKey         = "key"
)

// WorkerID is the worker instance key reported by an SDK worker.
func WorkerID(id string) zap.Field { return zap.String(KeyWorkerID, id) }

// Namespace is a namespace name.
func Namespace(name string) zap.Field { return zap.String(KeyNamespace, name) }

// NamespaceID is a namespace ID.
func NamespaceID(id string) zap.Field { return zap.String(KeyNamespaceID, id) }

// ShardID is a history shard number.
func ShardID(id int32) zap.Field { return zap.Int32(KeyShardID, id) }

// RangeID is a shard's ownership fencing token.
func RangeID(id int64) zap.Field { return zap.Int64(KeyRangeID, id) }

// BusinessID is the business ID of a CHASM execution.
func BusinessID(id string) zap.Field { return zap.String(KeyBusinessID, id) }

// RunID is the run ID of a CHASM execution.
func RunID(id string) zap.Field { return zap.String(KeyRunID, id) }

// Archetype is the kind of a CHASM execution's root component, e.g. "worker".
func Archetype(name string) zap.Field { return zap.String(KeyArchetype, name) }

// TaskType is the type name of a CHASM task.
func TaskType(name string) zap.Field { return zap.String(KeyTaskType, name) }

// TaskID is a task's ID within its shard queue.
func TaskID(id int64) zap.Field { return zap.Int64(KeyTaskID, id) }

// Destination is the target of an outbound (side-effect) task.
func Destination(dest string) zap.Field { return zap.String(KeyDestination, dest) }

// Attempt is the attempt number of a task or activity, starting at 1.
func Attempt(n int32) zap.Field { return zap.Int32(KeyAttempt, n) }

// Error is an error; a nil error yields a field that logs nothing.
func Error(err error) zap.Field {
	if err == nil {
		return zap.Skip()
	}
	return zap.NamedError(KeyError, err)
}

// Component is the server component (or subsystem) a line comes from, e.g. "timer-queue".
func Component(name string) zap.Field { return zap.String(KeyComponent, name) }

// Address is a network address (host:port).
func Address(addr string) zap.Field { return zap.String(KeyAddress, addr) }

// Key is a dynamic config key.
func Key(key string) zap.Field { return zap.String(KeyKey, key) }
