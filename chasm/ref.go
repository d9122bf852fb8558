package chasm

import (
	"fmt"
	"strings"
)

// ExecutionKey identifies an execution within an archetype. BusinessID is chosen by the
// library (a worker's WorkerInstanceKey, an activity's ID); RunID distinguishes reuses of a
// BusinessID and is assigned by the engine. An empty RunID addresses the current run.
type ExecutionKey struct {
	NamespaceID string
	BusinessID  string
	RunID       string
}

func (k ExecutionKey) String() string {
	return fmt.Sprintf("%s/%s/%s", k.NamespaceID, k.BusinessID, k.RunID)
}

// ComponentRef addresses the root component of an execution: its archetype (the
// library-qualified component name, for example "worker.worker") and its key.
type ComponentRef struct {
	Archetype string
	Key       ExecutionKey
}

// NewComponentRef returns a reference to the component of archetype at key.
func NewComponentRef(archetype string, key ExecutionKey) ComponentRef {
	return ComponentRef{Archetype: archetype, Key: key}
}

func (r ComponentRef) String() string {
	return r.Archetype + ":" + r.Key.String()
}

// Noun names the component in messages to API callers: the archetype's component name
// ("worker" for worker.worker, "activity" for activity.activity).
func (r ComponentRef) Noun() string {
	if i := strings.LastIndexByte(r.Archetype, '.'); i >= 0 {
		return r.Archetype[i+1:]
	}
	if r.Archetype == "" {
		return "execution"
	}
	return r.Archetype
}
