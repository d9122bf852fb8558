package chasm

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
)

// WithCopyOnWrite declares that the component's transactions never modify a message nested in
// its state in place: they replace it (w.LeaseDeadline = timestamppb.New(t), a list element
// swapped for a new message). A transaction then works on shallowCopy(committed): a new
// top-level message with the committed one's fields, lists and maps in new containers, nested
// messages shared. A transaction that fails still leaves the committed state as it was, and a
// state a commit observer or a watcher holds never changes.
//
// Such a copy costs a few allocations whatever the size of the state, where proto.Clone copies
// every nested message: for a worker, the snapshot its SDK sent, which a heartbeat replaces
// anyway. shallowCopy is written by hand (protoreflect would cost as much as the deep copy):
// chasmtest.CheckShallowCopy proves it copies every field, and SetCopyOnWriteChecks makes the
// engine prove the promise in tests.
func WithCopyOnWrite[S proto.Message](shallowCopy func(S) S) ComponentOption {
	return func(c *RegistrableComponent) {
		c.copyState = func(m proto.Message) proto.Message { return shallowCopy(m.(S)) }
	}
}

// copyOnWriteChecks is set by SetCopyOnWriteChecks.
var copyOnWriteChecks atomic.Bool

// SetCopyOnWriteChecks makes every transaction of a WithCopyOnWrite component check that it
// left the committed state as it was, and fail if it did not: a nested message changed in
// place would otherwise corrupt the committed state and every watcher's copy of it. The check
// encodes the state twice per transaction, so it is for tests; a package's TestMain turns it
// on.
func SetCopyOnWriteChecks(on bool) { copyOnWriteChecks.Store(on) }

// copyState returns a transaction's private copy of the committed state.
func (e *Execution) copyState() proto.Message {
	if e.component.copyState != nil {
		return e.component.copyState(e.state)
	}
	return proto.Clone(e.state)
}

// checkCopyOnWrite returns the check to run after a transaction of e's component, or nil.
func (e *Execution) checkCopyOnWrite() func() error {
	if e.component.copyState == nil || !copyOnWriteChecks.Load() {
		return nil
	}
	encode := func() []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e.state)
		if err != nil {
			panic(fmt.Sprintf("chasm: execution %s: encode state: %v", e.key, err))
		}
		return b
	}
	before := encode()
	return func() error {
		if !bytes.Equal(before, encode()) {
			return fmt.Errorf("chasm: execution %s: a transaction of copy-on-write component %s modified the committed state in place",
				e.key, e.component.fullName)
		}
		return nil
	}
}
