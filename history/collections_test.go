package history

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/persistence"
)

func TestBucketEncoding(t *testing.T) {
	t.Parallel()
	items := []packedItem{{key: "a", value: []byte("1")}, {key: "", value: nil}, {key: strings.Repeat("k", 300), value: make([]byte, 70_000)}}
	data := encodeBucket(items)
	var got []packedItem
	require.NoError(t, decodeBucket(data, func(key string, value []byte) {
		got = append(got, packedItem{key: key, value: value})
	}))
	require.Len(t, got, len(items))
	for i := range items {
		require.Equal(t, items[i].key, got[i].key)
		require.Equal(t, len(items[i].value), len(got[i].value))
	}

	noop := func(string, []byte) {}
	require.ErrorIs(t, decodeBucket(nil, noop), errCorruptBucket)
	require.ErrorIs(t, decodeBucket([]byte{9}, noop), errCorruptBucket, "unknown format")
	require.ErrorIs(t, decodeBucket(data[:len(data)-1], noop), errCorruptBucket, "truncated")
	require.ErrorIs(t, decodeBucket([]byte{bucketFormatV1, 1, 'k'}, noop), errCorruptBucket, "key without value")
}

func TestBucketLayoutSplitsByCount(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, bucketMaxEntries, bucketMaxEntries + 1, 100, 10_000} {
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = keyHash(fmt.Sprintf("legacy-%d", i))
		}
		slices.Sort(hashes)
		layout := bucketLayout(hashes)
		covered := 0
		for _, b := range layout {
			require.LessOrEqual(t, b.hi-b.lo, bucketMaxEntries)
			require.Equal(t, covered, b.lo, "buckets are contiguous, in hash order")
			for _, h := range hashes[b.lo:b.hi] {
				require.True(t, b.covers(h))
			}
			covered = b.hi
		}
		require.Equal(t, n, covered)
		t.Logf("%d entries: %d buckets", n, len(layout))
		if n <= bucketMaxEntries && n > 0 {
			require.Len(t, layout, 1)
		}
		require.LessOrEqual(t, len(layout), 2+n*3/bucketMaxEntries, "keys alike spread evenly")
	}
}

// collectionModel drives a reminder execution's Notes collection through random changes and
// keeps the rows a store would hold, applying each write's puts and deletes.
type collectionModel struct {
	t        *testing.T
	registry *chasm.Registry
	exec     *chasm.Execution
	rows     map[persistence.CollectionEntryKey][]byte
	stale    *staleRows
	// rowsWritten counts puts and deletes.
	rowsWritten int
}

func newCollectionModel(t *testing.T) *collectionModel {
	registry := chasm.NewRegistry()
	require.NoError(t, registry.Register(reminder.NewLibrary(reminder.NewRecordingSink())))
	rc, ok := registry.Component(reminder.Archetype)
	require.True(t, ok)
	exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "r", RunID: "run"})
	m, err := exec.Start(time.Unix(0, 0), func(ctx chasm.MutableContext) (chasm.Component, error) {
		return reminder.New(ctx, time.Hour, "")
	}, nil)
	require.NoError(t, err)
	exec.Apply(m)
	return &collectionModel{t: t, registry: registry, exec: exec, rows: make(map[persistence.CollectionEntryKey][]byte)}
}

// change runs one transaction on the notes and writes it to the model store.
func (c *collectionModel) change(fn func(ctx chasm.MutableContext, r *reminder.Reminder)) (puts, deletes int) {
	c.t.Helper()
	m, err := c.exec.Update(time.Unix(0, 0), func(ctx chasm.MutableContext, comp chasm.Component) error {
		fn(ctx, comp.(*reminder.Reminder))
		return nil
	})
	require.NoError(c.t, err)
	p, d := packCollectionChanges(c.exec, m, c.stale)
	putKeys := make(map[persistence.CollectionEntryKey]bool)
	for _, e := range p {
		putKeys[persistence.CollectionEntryKey{Collection: e.Collection, Key: e.Key}] = true
	}
	for _, k := range d {
		require.False(c.t, putKeys[k], "a row both put and deleted: %v", k)
		delete(c.rows, k)
	}
	for _, e := range p {
		c.rows[persistence.CollectionEntryKey{Collection: e.Collection, Key: e.Key}] = e.Value
	}
	c.rowsWritten += len(p) + len(d)
	c.exec.Apply(m)
	c.stale = nil
	return len(p), len(d)
}

// check verifies the rows hold exactly the committed notes, in the canonical layout.
func (c *collectionModel) check() {
	c.t.Helper()
	entries, stale, err := unpackCollections(c.storedRows())
	require.NoError(c.t, err)
	require.Nil(c.t, stale, "the rows are in the canonical layout")
	got := make(map[string]string)
	for _, e := range entries {
		require.Equal(c.t, reminder.Notes.Name(), e.Collection)
		got[e.Key] = string(e.Value)
	}
	want := make(map[string]string)
	c.exec.RangeCollection(reminder.Notes.Name(), func(key string, value []byte) bool {
		want[key] = string(value)
		return true
	})
	require.Equal(c.t, want, got)
	for k, v := range c.rows {
		require.True(c.t, strings.HasPrefix(k.Collection, bucketCollectionPrefix), "no row per entry: %v", k)
		n := 0
		require.NoError(c.t, decodeBucket(v, func(string, []byte) { n++ }))
		require.Positive(c.t, n, "no empty bucket row")
		require.LessOrEqual(c.t, n, bucketMaxEntries)
	}
}

func (c *collectionModel) storedRows() []persistence.CollectionEntry {
	var rows []persistence.CollectionEntry
	for _, k := range slices.SortedFunc(maps.Keys(c.rows), func(a, b persistence.CollectionEntryKey) int {
		return strings.Compare(a.Collection+"\x00"+a.Key, b.Collection+"\x00"+b.Key)
	}) {
		rows = append(rows, persistence.CollectionEntry{Collection: k.Collection, Key: k.Key, Value: c.rows[k]})
	}
	return rows
}

func TestPackedCollectionsFollowEveryChange(t *testing.T) {
	t.Parallel()
	c := newCollectionModel(t)

	// A registration binding 100 entries is a handful of rows.
	puts, deletes := c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for i := range 100 {
			r.AddNote(ctx, fmt.Sprintf("%d:activity-%d/run", len(fmt.Sprint(i))+9, i), "bound")
		}
	})
	c.check()
	require.Zero(t, deletes)
	require.LessOrEqual(t, puts, 100/bucketMaxEntries*2, "100 entries are a few rows")
	t.Logf("100 entries in one write: %d rows", puts)

	// One more entry rewrites one bucket, or the two a split makes.
	puts, deletes = c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.AddNote(ctx, "one-more", "x") })
	c.check()
	require.LessOrEqual(t, puts+deletes, 3)

	// Random puts, replacements and deletes, checked after each write.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
			for range rng.IntN(20) + 1 {
				id := fmt.Sprintf("note-%d", rng.IntN(400))
				if rng.IntN(3) == 0 {
					r.RemoveNote(ctx, id)
				} else {
					r.AddNote(ctx, id, fmt.Sprint(rng.Int()))
				}
			}
		})
		c.check()
	}

	// Deleting everything deletes every bucket row.
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for _, k := range reminder.Notes.Keys(ctx) {
			r.RemoveNote(ctx, k)
		}
	})
	c.check()
	require.Empty(t, c.rows)
}

func TestLastEntryOfABucketDeletesItsRow(t *testing.T) {
	t.Parallel()
	c := newCollectionModel(t)
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
		r.AddNote(ctx, "a", "1")
		r.AddNote(ctx, "b", "2")
	})
	c.check()
	require.Len(t, c.rows, 1)
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.RemoveNote(ctx, "a") })
	c.check()
	require.Len(t, c.rows, 1)
	_, deletes := c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.RemoveNote(ctx, "b") })
	c.check()
	require.Equal(t, 1, deletes)
	require.Empty(t, c.rows)

	// A merge: from bucketMaxEntries+1 entries (split) down to bucketMaxEntries (one bucket).
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for i := range bucketMaxEntries + 1 {
			r.AddNote(ctx, fmt.Sprint(i), "x")
		}
	})
	c.check()
	require.Greater(t, len(c.rows), 1)
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.RemoveNote(ctx, "0") })
	c.check()
	require.Len(t, c.rows, 1)
}

func TestLegacyRowsAreReadAndConverted(t *testing.T) {
	t.Parallel()
	c := newCollectionModel(t)
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) {
		for i := range 100 {
			r.AddNote(ctx, fmt.Sprint(i), "kept")
		}
	})
	// Replace the buckets by one row per entry, as an older vigil stored them.
	legacy := make(map[persistence.CollectionEntryKey][]byte)
	c.exec.RangeCollection(reminder.Notes.Name(), func(key string, value []byte) bool {
		legacy[persistence.CollectionEntryKey{Collection: reminder.Notes.Name(), Key: key}] = value
		return true
	})
	c.rows = legacy
	entries, stale, err := unpackCollections(c.storedRows())
	require.NoError(t, err)
	require.Len(t, entries, 100)
	require.NotNil(t, stale)
	require.Equal(t, []string{reminder.Notes.Name()}, stale.legacy)
	c.stale = stale

	// The first change converts the whole collection: legacy rows deleted, buckets put.
	puts, deletes := c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.RemoveNote(ctx, "7") })
	c.check()
	require.Equal(t, 100, deletes)
	require.Equal(t, len(c.rows), puts)
	require.Equal(t, 99, len(reminderNotes(t, c)))

	// Buckets that are not the canonical layout (and a legacy row beside them) are rewritten.
	c.rows[persistence.CollectionEntryKey{Collection: bucketCollectionPrefix + reminder.Notes.Name(), Key: "9.1ff"}] =
		encodeBucket([]packedItem{{key: "stray", value: []byte("s")}})
	c.rows[persistence.CollectionEntryKey{Collection: reminder.Notes.Name(), Key: "legacy"}] = []byte("l")
	entries, stale, err = unpackCollections(c.storedRows())
	require.NoError(t, err)
	require.Len(t, entries, 101)
	require.NotNil(t, stale)
	require.NotEmpty(t, stale.buckets)
	// Reload the execution from those rows, as loadRun would.
	c.exec, err = chasm.LoadExecution(c.registry, c.exec.Archetype(), c.exec.Key(), mustState(t, c.exec), entries)
	require.NoError(t, err)
	c.stale = stale
	c.change(func(ctx chasm.MutableContext, r *reminder.Reminder) { r.AddNote(ctx, "new", "n") })
	c.check()
	notes := reminderNotes(t, c)
	require.Len(t, notes, 102)
	require.Contains(t, notes, "stray")
	require.Contains(t, notes, "legacy")

	// A key stored twice is corruption, reported rather than guessed at.
	c.rows[persistence.CollectionEntryKey{Collection: reminder.Notes.Name(), Key: "new"}] = []byte("dup")
	_, _, err = unpackCollections(c.storedRows())
	require.ErrorContains(t, err, "stored twice")
}

func reminderNotes(t *testing.T, c *collectionModel) map[string][]byte {
	t.Helper()
	notes := make(map[string][]byte)
	c.exec.RangeCollection(reminder.Notes.Name(), func(key string, value []byte) bool {
		notes[key] = value
		return true
	})
	return notes
}

func mustState(t *testing.T, exec *chasm.Execution) []byte {
	t.Helper()
	state, _, err := exec.Persisted()
	require.NoError(t, err)
	return state
}

// BenchmarkPackOneChange is the cost of storing one changed entry of a large collection.
func BenchmarkPackOneChange(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			registry := chasm.NewRegistry()
			if err := registry.Register(reminder.NewLibrary(reminder.NewRecordingSink())); err != nil {
				b.Fatal(err)
			}
			rc, _ := registry.Component(reminder.Archetype)
			exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "r", RunID: "run"})
			m, err := exec.Start(time.Unix(0, 0), func(ctx chasm.MutableContext) (chasm.Component, error) {
				r, err := reminder.New(ctx, time.Hour, "")
				for i := range n {
					r.AddNote(ctx, fmt.Sprintf("11:activity-%d/run", i), strings.Repeat("x", 100))
				}
				return r, err
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			exec.Apply(m)
			m, err = exec.Update(time.Unix(0, 0), func(ctx chasm.MutableContext, c chasm.Component) error {
				c.(*reminder.Reminder).AddNote(ctx, "one-more", "x")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				packCollectionChanges(exec, m, nil)
			}
		})
	}
}
