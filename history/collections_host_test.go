package history_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/persistence"
)

// rowCountingStore counts the collection rows each committed write puts and deletes.
type rowCountingStore struct {
	persistence.Store
	mu            sync.Mutex
	puts, deletes int
}

func (s *rowCountingStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	results, err := s.Store.WriteBatch(ctx, writes)
	if err == nil {
		s.mu.Lock()
		for i, w := range writes {
			if results[i] == nil {
				s.puts += len(w.CollectionPuts)
				s.deletes += len(w.CollectionDeletes)
			}
		}
		s.mu.Unlock()
	}
	return results, err
}

func (s *rowCountingStore) take() (puts, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	puts, deletes, s.puts, s.deletes = s.puts, s.deletes, 0, 0
	return puts, deletes
}

func updateNotes(t *testing.T, e chasm.Engine, ref chasm.ComponentRef, fn func(ctx chasm.MutableContext, r *reminder.Reminder)) {
	t.Helper()
	_, err := chasm.UpdateComponent(context.Background(), e, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
		fn(ctx, r)
		return struct{}{}, nil
	})
	require.NoError(t, err)
}

func storedRecord(t *testing.T, h *historytest.Host, id string) *persistence.ExecutionRecord {
	t.Helper()
	shardID := shard.ForKey(testNamespace, id, h.Engine.NumShards())
	record, err := h.Store.GetExecution(context.Background(), shardID, persistence.ExecutionKey{
		NamespaceID: testNamespace, ArchetypeID: mustArchetypeID(t, h), BusinessID: id, RunID: runID(t, h, shardID, id),
	})
	require.NoError(t, err)
	return record
}

func notesOf(t *testing.T, e chasm.Engine, ref chasm.ComponentRef) map[string]string {
	t.Helper()
	notes := make(map[string]string)
	_, err := chasm.ReadComponent(context.Background(), e, ref, func(ctx chasm.Context, _ *reminder.Reminder) (struct{}, error) {
		return struct{}{}, reminder.Notes.Range(ctx, func(key string, n *testpb.Note) bool {
			notes[key] = n.Text
			return true
		})
	})
	require.NoError(t, err)
	return notes
}

func TestCollectionsAreStoredPacked(t *testing.T) {
	t.Parallel()
	store := &rowCountingStore{}
	h := historytest.Start(t, historytest.Options{
		Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())},
		WrapStore: func(s persistence.Store) persistence.Store { store.Store = s; return store },
	})
	ref := startReminder(t, h.Engine, "r1", time.Hour, "")
	store.take()

	// A registration binding 100 entries.
	updateNotes(t, h.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for i := range 100 {
			r.AddNote(ctx, fmt.Sprintf("%d:activity-%d/run-1", len(fmt.Sprint(i))+9, i), "bound")
		}
	})
	puts, deletes := store.take()
	t.Logf("binding 100 entries wrote %d rows (one per entry before)", puts)
	require.Zero(t, deletes)
	require.LessOrEqual(t, puts, 8)
	record := storedRecord(t, h, "r1")
	require.Len(t, record.Collections, puts)
	for _, row := range record.Collections {
		require.True(t, strings.HasPrefix(row.Collection, "#"), "a bucket row: %q", row.Collection)
	}
	require.Len(t, notesOf(t, h.Engine, ref), 100)

	// Dropping them all deletes as many rows.
	updateNotes(t, h.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for _, k := range reminder.Notes.Keys(ctx) {
			r.RemoveNote(ctx, k)
		}
	})
	puts, deletes = store.take()
	require.Zero(t, puts)
	require.Equal(t, len(record.Collections), deletes)
	require.Empty(t, storedRecord(t, h, "r1").Collections)
}

func TestLegacyCollectionRowsAreConverted(t *testing.T) {
	t.Parallel()
	lib := reminder.NewLibrary(reminder.NewRecordingSink())
	h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{lib}})
	ref := startReminder(t, h.Engine, "r1", time.Hour, "")
	h.Stop()

	// Store 100 notes one row per entry, as vigil did before collections were packed.
	h2 := historytest.Start(t, historytest.Options{Path: h.Path, Libraries: []chasm.Library{lib}})
	shardID := shard.ForKey(testNamespace, "r1", h2.Engine.NumShards())
	info, err := h2.Store.GetShard(context.Background(), shardID)
	require.NoError(t, err)
	record := storedRecord(t, h2, "r1")
	state := &testpb.ReminderState{}
	require.NoError(t, proto.Unmarshal(record.State, state))
	state.NotesCount = 100
	stateData, err := proto.Marshal(state)
	require.NoError(t, err)
	w := &persistence.ExecutionWrite{
		ShardID: shardID, RangeID: info.RangeID, Mode: persistence.WriteModeUpdate, Key: record.Key,
		PrevDBVersion: record.DBVersion, NextDBVersion: record.DBVersion + 1,
		State: stateData, Lifecycle: record.Lifecycle, Indexed: record.Indexed,
	}
	want := make(map[string]string)
	for i := range 100 {
		key := fmt.Sprintf("legacy-%d", i)
		value, err := proto.Marshal(&testpb.Note{Text: "v" + key})
		require.NoError(t, err)
		w.CollectionPuts = append(w.CollectionPuts, persistence.CollectionEntry{Collection: reminder.Notes.Name(), Key: key, Value: value})
		want[key] = "v" + key
	}
	results, err := h2.Store.WriteBatch(context.Background(), []*persistence.ExecutionWrite{w})
	require.NoError(t, err)
	require.NoError(t, results[0])

	// Read as they are; a heartbeat-like change leaves them alone.
	require.Equal(t, want, notesOf(t, h2.Engine, ref))
	_, err = chasm.UpdateComponent(context.Background(), h2.Engine, ref, func(chasm.MutableContext, *reminder.Reminder) (struct{}, error) {
		return struct{}{}, nil
	})
	require.NoError(t, err)
	require.Len(t, storedRecord(t, h2, "r1").Collections, 100)

	// The first change to the collection converts it in the same write.
	updateNotes(t, h2.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) {
		r.RemoveNote(ctx, "legacy-7")
		r.AddNote(ctx, "new", "n")
	})
	delete(want, "legacy-7")
	want["new"] = "n"
	rows := storedRecord(t, h2, "r1").Collections
	require.LessOrEqual(t, len(rows), 8)
	for _, row := range rows {
		require.Equal(t, "#"+reminder.Notes.Name(), row.Collection, "every legacy row is gone")
	}
	require.Equal(t, want, notesOf(t, h2.Engine, ref))

	// And a restart reads the buckets back.
	h2.Stop()
	h3 := historytest.Start(t, historytest.Options{Path: h.Path, Libraries: []chasm.Library{lib}})
	require.Equal(t, want, notesOf(t, h3.Engine, ref))
	updateNotes(t, h3.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) { r.RemoveNote(ctx, "new") })
	delete(want, "new")
	require.Equal(t, want, notesOf(t, h3.Engine, ref))
	for _, row := range storedRecord(t, h3, "r1").Collections {
		require.Equal(t, "#"+reminder.Notes.Name(), row.Collection)
	}
}
