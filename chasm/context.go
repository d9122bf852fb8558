package chasm

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
)

// Context is what component code sees during a read. Now is fixed for the whole transaction
// and comes from the engine's TimeSource: component code never reads the wall clock.
type Context interface {
	// Now returns the transaction's time.
	Now() time.Time
	// Ref returns a reference to the execution's root component.
	Ref() ComponentRef
	// ExecutionKey returns the execution's key, RunID included.
	ExecutionKey() ExecutionKey
	// RecoveredAt is the last time the host may have lost deferred writes of the execution
	// (DeferWrite): when it acquired the execution's shard, or when a failed write dropped its
	// in-memory copy. A change the component made in memory before then may be missing from
	// the state it sees; the zero time means none can be.
	RecoveredAt() time.Time

	txn() *transaction
}

// MutableContext is what component code sees during an update.
type MutableContext interface {
	Context
	// AddTask schedules a task, written atomically with the transaction's state. The payload's
	// Go type selects the registered task type. A bad task (unregistered payload, attributes
	// that contradict the task type) fails the whole transaction.
	AddTask(attrs TaskAttributes, payload proto.Message)
	// DeleteExecution removes the execution when the transaction commits: its state,
	// collections and pending tasks go, and the business ID is free again. Such a transaction
	// may change nothing else (no tasks, no collection changes).
	DeleteExecution()
	// DeferWrite lets the engine keep the transaction's change in memory and answer without
	// writing it: reads see it at once, and the execution's next written transaction persists
	// it with its own. The engine honours it only for a change of the state alone (no task,
	// collection, lifecycle, index or visibility change, not a create or delete), and writes
	// any other as usual. A deferred change is lost if the host crashes or hands the shard
	// off before that next write; RecoveredAt tells the component when that may have happened.
	DeferWrite()
	// PostponeTimer tells the engine that the execution's pending timer of payload's task type
	// (a singleton timer) would, if it ran before until, only defer itself to until
	// (DeferTask): the engine may hold it in memory until then instead of running it. Nothing
	// durable changes: the stored timer keeps its time, and after a restart fires at it. The
	// hold lasts until the execution's next committed transaction, which keeps it only by
	// postponing again, so a change that makes the timer due sooner needs no step of its own.
	// A transaction that adds a task of the type does not hold it. An engine may ignore the
	// call: the timer then runs and defers itself.
	PostponeTimer(until time.Time, payload proto.Message)
}

// transaction implements Context and MutableContext for one engine call on one execution.
type transaction struct {
	exec    *Execution
	now     time.Time
	mutable bool

	tasks []*Task
	// err is the first error recorded by a method that has no error result (AddTask,
	// Collection.Put); it fails the transaction.
	err error

	// Pending collection changes, applied to the execution only once the write is durable.
	puts    map[string]map[string][]byte
	deletes map[string]map[string]struct{}

	// deleteExecution is set by DeleteExecution.
	deleteExecution bool
	// deferWrite is set by DeferWrite.
	deferWrite bool
	// postponed holds the PostponeTimer calls, the latest per task type.
	postponed []Postponement
}

func newTransaction(exec *Execution, now time.Time, mutable bool) *transaction {
	return &transaction{exec: exec, now: now, mutable: mutable}
}

func (t *transaction) Now() time.Time { return t.now }

func (t *transaction) Ref() ComponentRef {
	return ComponentRef{Archetype: t.exec.component.fullName, Key: t.exec.key}
}

func (t *transaction) ExecutionKey() ExecutionKey { return t.exec.key }

func (t *transaction) RecoveredAt() time.Time { return t.exec.recoveredAt }

func (t *transaction) DeferWrite() { t.deferWrite = true }

func (t *transaction) txn() *transaction { return t }

func (t *transaction) PostponeTimer(until time.Time, payload proto.Message) {
	if !t.mutable {
		t.fail(fmt.Errorf("chasm: PostponeTimer called in a read-only context"))
		return
	}
	taskType, ok := t.exec.registry.TaskForPayload(payload)
	if !ok || !taskType.singleton {
		t.fail(fmt.Errorf("chasm: PostponeTimer needs the payload of a singleton timer, not %T", payload))
		return
	}
	for i := range t.postponed {
		if t.postponed[i].Type == taskType {
			t.postponed[i].Until = until
			return
		}
	}
	t.postponed = append(t.postponed, Postponement{Type: taskType, Until: until})
}

func (t *transaction) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *transaction) AddTask(attrs TaskAttributes, payload proto.Message) {
	if !t.mutable {
		t.fail(fmt.Errorf("chasm: AddTask called in a read-only context"))
		return
	}
	taskType, ok := t.exec.registry.TaskForPayload(payload)
	if !ok {
		t.fail(fmt.Errorf("chasm: no task type is registered for payload %T", payload))
		return
	}
	if err := attrs.validate(); err != nil {
		t.fail(fmt.Errorf("chasm: task %s: %w", taskType.fullName, err))
		return
	}
	if taskType.pure && attrs.Destination != "" {
		t.fail(fmt.Errorf("chasm: pure task %s cannot have a destination", taskType.fullName))
		return
	}
	if attrs.Destination == "" && attrs.ScheduledTime.IsZero() {
		attrs.ScheduledTime = t.now
	}
	if taskType.singleton {
		// A singleton added twice in one transaction keeps only the latest, exactly as the
		// store keeps only the latest across transactions.
		kept := t.tasks[:0]
		for _, existing := range t.tasks {
			if existing.Type != taskType {
				kept = append(kept, existing)
			}
		}
		t.tasks = kept
	}
	t.tasks = append(t.tasks, &Task{Type: taskType, Attributes: attrs, Payload: payload})
}

func (t *transaction) DeleteExecution() {
	if !t.mutable {
		t.fail(fmt.Errorf("chasm: DeleteExecution called in a read-only context"))
		return
	}
	t.deleteExecution = true
}

// collection access, overlaying pending changes on the committed entries.

func (t *transaction) checkCollection(name string) error {
	for _, declared := range t.exec.component.collections {
		if declared == name {
			return nil
		}
	}
	return fmt.Errorf("chasm: component %s declares no collection %q", t.exec.component.fullName, name)
}

func (t *transaction) collectionGet(name, key string) ([]byte, bool) {
	if _, deleted := t.deletes[name][key]; deleted {
		return nil, false
	}
	if v, ok := t.puts[name][key]; ok {
		return v, true
	}
	v, ok := t.exec.collections[name][key]
	return v, ok
}

func (t *transaction) collectionPut(name, key string, value []byte) {
	if t.puts == nil {
		t.puts = make(map[string]map[string][]byte)
	}
	if t.puts[name] == nil {
		t.puts[name] = make(map[string][]byte)
	}
	t.puts[name][key] = value
	delete(t.deletes[name], key)
}

func (t *transaction) collectionDelete(name, key string) {
	delete(t.puts[name], key)
	if _, ok := t.exec.collections[name][key]; !ok {
		return
	}
	if t.deletes == nil {
		t.deletes = make(map[string]map[string]struct{})
	}
	if t.deletes[name] == nil {
		t.deletes[name] = make(map[string]struct{})
	}
	t.deletes[name][key] = struct{}{}
}

func (t *transaction) collectionLen(name string) int {
	n := len(t.exec.collections[name]) - len(t.deletes[name])
	for key := range t.puts[name] {
		if _, ok := t.exec.collections[name][key]; !ok {
			n++
		}
	}
	return n
}

func (t *transaction) collectionKeys(name string) []string {
	keys := make([]string, 0, t.collectionLen(name))
	for key := range t.exec.collections[name] {
		if _, deleted := t.deletes[name][key]; !deleted {
			if _, put := t.puts[name][key]; !put {
				keys = append(keys, key)
			}
		}
	}
	for key := range t.puts[name] {
		keys = append(keys, key)
	}
	return keys
}
