package history_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/persistence"
)

// failingStore fails every WriteBatch while fail is set (a full disk, a lost database).
type failingStore struct {
	persistence.Store
	fail *atomic.Bool
}

func (s *failingStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	if s.fail.Load() {
		return nil, errors.New("injected: database or disk is full")
	}
	return s.Store.WriteBatch(ctx, writes)
}

// A long poll that began before a failed write of its execution still sees the next change.
// (Found by the chaos suite: after a write failed on a full disk, the cached execution was
// dropped without waking its pollers, so a client's Get of an activity that had completed
// waited activity.longPollMaxWait, 60 s, for a result the server already had.)
func TestPollSeesChangesAfterAFailedWrite(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	h := historytest.Start(t, historytest.Options{
		Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())},
		WrapStore: func(s persistence.Store) persistence.Store { return &failingStore{Store: s, fail: &fail} },
	})
	ref := startReminder(t, h.Engine, "r1", time.Hour, "")

	waiting := make(chan struct{})
	var once sync.Once
	polled := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := chasm.PollComponent(ctx, h.Engine, ref, func(_ chasm.Context, r *reminder.Reminder) (struct{}, bool, error) {
			once.Do(func() { close(waiting) })
			return struct{}{}, r.NotesCount > 0, nil
		})
		polled <- err
	}()
	<-waiting

	addNote := func() error {
		_, err := chasm.UpdateComponent(context.Background(), h.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
			r.AddNote(ctx, "n1", "after the failure")
			return struct{}{}, nil
		})
		return err
	}
	fail.Store(true)
	require.Error(t, addNote(), "the injected failure reaches the caller")
	fail.Store(false)
	require.NoError(t, addNote())
	require.NoError(t, <-polled, "the poll sees the note written after the failed write")
}
