package sqlcommon

import (
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/persistence"
)

// ValidateWrite rejects a malformed write before it touches the database. These are bugs in
// the caller, reported in the write's own result, with messages that start with backend.
//
// storable reports whether strings fit the backend's TEXT columns; it is checked on every
// string the write stores or looks rows up by. Nil admits any string.
func ValidateWrite(backend string, w *persistence.ExecutionWrite, storable func(ss ...string) bool) error {
	if w == nil {
		return errors.New(backend + ": invalid write: nil")
	}
	if storable == nil {
		storable = func(...string) bool { return true }
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%s: invalid write to shard %d, execution %s: %s",
			backend, w.ShardID, KeyString(w.Key), fmt.Sprintf(format, args...))
	}
	k := w.Key
	if k.NamespaceID == "" || k.BusinessID == "" || k.RunID == "" {
		return invalid("namespace, business and run IDs are required")
	}
	if !storable(k.NamespaceID, k.BusinessID, k.RunID) {
		return invalid("IDs must be valid UTF-8 without NUL bytes")
	}
	switch w.Mode {
	case persistence.WriteModeCreate, persistence.WriteModeUpdate:
		if w.NextDBVersion <= w.PrevDBVersion {
			return invalid("next db version %d is not greater than previous %d", w.NextDBVersion, w.PrevDBVersion)
		}
		switch w.Lifecycle {
		case persistence.LifecycleRunning, persistence.LifecycleCompleted, persistence.LifecycleFailed:
		default:
			return invalid("unknown lifecycle %d", w.Lifecycle)
		}
		if !storable(w.ExpectedCurrentRunID, w.Indexed.Status, w.Indexed.TaskQueue) {
			return invalid("expected run ID and indexed fields must be valid UTF-8 without NUL bytes")
		}
		if w.Visibility != nil && !VisibilityStorable(w.Visibility, storable) {
			return invalid("visibility strings must be valid UTF-8 without NUL bytes")
		}
	case persistence.WriteModeDelete:
		if len(w.CollectionPuts)+len(w.CollectionDeletes)+len(w.TimerTasks)+len(w.OutboundTasks) > 0 || w.Visibility != nil {
			return invalid("a delete carries no collection changes, tasks or visibility record")
		}
		return nil
	default:
		return invalid("unknown write mode %d", w.Mode)
	}

	for _, e := range w.CollectionPuts {
		if !storable(e.Collection, e.Key) {
			return invalid("collection entry %q/%q: names must be valid UTF-8 without NUL bytes", e.Collection, e.Key)
		}
	}
	// Only a write that both puts and deletes needs the set: a heartbeat binding thousands of
	// activities should not build a map it never reads.
	var puts map[persistence.CollectionEntryKey]struct{}
	if len(w.CollectionPuts) > 0 && len(w.CollectionDeletes) > 0 {
		puts = make(map[persistence.CollectionEntryKey]struct{}, len(w.CollectionPuts))
		for _, e := range w.CollectionPuts {
			puts[persistence.CollectionEntryKey{Collection: e.Collection, Key: e.Key}] = struct{}{}
		}
	}
	for _, d := range w.CollectionDeletes {
		if _, ok := puts[d]; ok {
			return invalid("collection entry %s/%s is both put and deleted", d.Collection, d.Key)
		}
		// A name the backend cannot store names no stored entry either, but the database
		// may still refuse it as a parameter.
		if !storable(d.Collection, d.Key) {
			return invalid("collection entry %q/%q: names must be valid UTF-8 without NUL bytes", d.Collection, d.Key)
		}
	}
	for _, t := range w.TimerTasks {
		switch {
		case t == nil:
			return invalid("nil timer task")
		case t.ShardID != w.ShardID || t.Execution != w.Key:
			return invalid("timer task %d belongs to shard %d, execution %s", t.TaskID, t.ShardID, KeyString(t.Execution))
		}
		if _, err := TimeToNanos(t.VisibilityTime); err != nil {
			return invalid("timer task %d: visibility %v", t.TaskID, err)
		}
	}
	for _, t := range w.OutboundTasks {
		switch {
		case t == nil:
			return invalid("nil outbound task")
		case t.ShardID != w.ShardID || t.Execution != w.Key:
			return invalid("outbound task %d belongs to shard %d, execution %s", t.TaskID, t.ShardID, KeyString(t.Execution))
		case !storable(t.Destination):
			return invalid("outbound task %d: destination must be valid UTF-8 without NUL bytes", t.TaskID)
		}
		if !t.CreatedTime.IsZero() {
			if _, err := TimeToNanos(t.CreatedTime); err != nil {
				return invalid("outbound task %d: created %v", t.TaskID, err)
			}
		}
	}
	return nil
}

// ApplyWrites applies a batch's writes in order inside its transaction, putting each write's own
// failure in results[i]. It stops at the first error that must abort the batch, naming the
// write that hit it.
func ApplyWrites(writes []*persistence.ExecutionWrite, results []error,
	apply func(*persistence.ExecutionWrite) (writeErr, err error),
) error {
	for i, w := range writes {
		writeErr, err := apply(w)
		if err != nil {
			return fmt.Errorf("write %d of %d (shard %d, execution %s): %w",
				i, len(writes), w.ShardID, KeyString(w.Key), err)
		}
		results[i] = writeErr
	}
	return nil
}
