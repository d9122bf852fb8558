package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/persistence"
)

// Collection entries are stored packed: each collection of an execution is split into buckets
// of at most bucketMaxEntries entries, and each bucket is one row holding its entries encoded
// (encodeBucket). A worker binding 100 activities writes a handful of rows instead of 100, and
// dropping them all deletes as many.
//
// The buckets are a pure function of the set of keys (bucketLayout): a bucket is a prefix of
// the keys' 64-bit hashes (keyHash), split in two while it holds more than bucketMaxEntries keys.
// So the host, which holds every entry of a loaded execution, knows which rows the store holds
// without reading them, and a write rewrites only the buckets holding a key it changes, plus
// the ones a split or merge creates or removes. Splitting by count keeps a bucket small
// whatever the collection's size: a worker with 10,000 bound activities that binds one more
// rewrites about 32 entries, not a sixteenth of 10,000.
//
// The layout is a storage format: bucketMaxEntries, bucketMaxDepth and the hash must not
// change without a new row naming. A row whose collection is not "#" + a name is a legacy
// entry row (one row per entry, as vigil stored them before); a collection stored in legacy
// rows or in buckets that are not the canonical layout is rewritten whole, in the same
// transaction, the first time the host writes a change to any collection of the execution.
const (
	bucketCollectionPrefix = "#"
	bucketMaxEntries       = 32
	bucketMaxDepth         = 32
	bucketFormatV1         = 1
)

// staleRows lists what the store holds of an execution outside the canonical layout: the
// next write that changes a collection rewrites these collections whole and deletes the rows.
type staleRows struct {
	// legacy are collections stored one row per entry: the rows are (name, key) for every
	// committed key of the collection.
	legacy []string
	// buckets are bucket rows of collections whose buckets are not the canonical layout.
	buckets []persistence.CollectionEntryKey
}

func (s *staleRows) has(name string) bool {
	if s == nil {
		return false
	}
	if slices.Contains(s.legacy, name) {
		return true
	}
	for _, k := range s.buckets {
		if k.Collection == bucketCollectionPrefix+name {
			return true
		}
	}
	return false
}

func (s *staleRows) collections() []string {
	if s == nil {
		return nil
	}
	names := slices.Clone(s.legacy)
	for _, k := range s.buckets {
		name := strings.TrimPrefix(k.Collection, bucketCollectionPrefix)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// keyHash is 64-bit FNV-1a followed by MurmurHash3's 64-bit finalizer: stable across
// releases and platforms, which the layout needs. The layout splits on the top bits, which
// plain FNV-1a barely changes between keys that differ only in their last characters
// ("act-1", "act-2").
func keyHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// packedItem is one entry of a collection being laid out.
type packedItem struct {
	hash  uint64
	key   string
	value []byte
}

func sortItems(items []packedItem) {
	slices.SortFunc(items, func(a, b packedItem) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
}

// bucket is one non-empty bucket of a layout: the keys whose hash starts with the depth bits
// of prefix, at [lo, hi) of the sorted hashes it was laid out from.
type bucket struct {
	depth  uint
	prefix uint64
	lo, hi int
}

// id is the bucket's row key.
func (b bucket) id() string {
	return strconv.FormatUint(uint64(b.depth), 10) + "." + strconv.FormatUint(b.prefix, 16)
}

func (b bucket) covers(h uint64) bool {
	return h>>(64-b.depth) == b.prefix // a shift by 64 gives 0: depth 0 covers everything
}

// bucketLayout returns the non-empty buckets of sorted hashes, in hash order.
func bucketLayout(hashes []uint64) []bucket {
	var out []bucket
	var split func(lo, hi int, depth uint, prefix uint64)
	split = func(lo, hi int, depth uint, prefix uint64) {
		if lo == hi {
			return
		}
		if hi-lo <= bucketMaxEntries || depth == bucketMaxDepth {
			out = append(out, bucket{depth: depth, prefix: prefix, lo: lo, hi: hi})
			return
		}
		bit := uint64(1) << (63 - depth)
		mid := lo + sort.Search(hi-lo, func(i int) bool { return hashes[lo+i]&bit != 0 })
		split(lo, mid, depth+1, prefix<<1)
		split(mid, hi, depth+1, prefix<<1|1)
	}
	split(0, len(hashes), 0, 0)
	return out
}

// encodeBucket encodes entries as a format byte then, for each, uvarint length and key,
// uvarint length and value.
func encodeBucket(items []packedItem) []byte {
	n := 1
	for _, it := range items {
		n += 2*binary.MaxVarintLen32 + len(it.key) + len(it.value)
	}
	buf := make([]byte, 1, n)
	buf[0] = bucketFormatV1
	for _, it := range items {
		buf = binary.AppendUvarint(buf, uint64(len(it.key)))
		buf = append(buf, it.key...)
		buf = binary.AppendUvarint(buf, uint64(len(it.value)))
		buf = append(buf, it.value...)
	}
	return buf
}

var errCorruptBucket = errors.New("corrupt bucket")

// decodeBucket calls fn for each entry of an encoded bucket. Values share data's memory.
func decodeBucket(data []byte, fn func(key string, value []byte)) error {
	if len(data) == 0 || data[0] != bucketFormatV1 {
		return fmt.Errorf("%w: unknown format", errCorruptBucket)
	}
	rest := data[1:]
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return nil, false
		}
		end := w + int(n)
		field := rest[w:end:end]
		rest = rest[end:]
		return field, true
	}
	for len(rest) > 0 {
		key, ok := next()
		if !ok {
			return fmt.Errorf("%w: truncated key", errCorruptBucket)
		}
		value, ok := next()
		if !ok {
			return fmt.Errorf("%w: truncated value", errCorruptBucket)
		}
		fn(string(key), value)
	}
	return nil
}

// unpackCollections turns the rows the store holds into an execution's entries, and says
// which of them are not in the canonical layout (nil if all are).
func unpackCollections(rows []persistence.CollectionEntry) ([]chasm.CollectionEntry, *staleRows, error) {
	if len(rows) == 0 {
		return nil, nil, nil
	}
	var (
		entries   []chasm.CollectionEntry
		legacy    []string
		bucketIDs = make(map[string][]string) // collection name -> stored bucket ids
	)
	for _, row := range rows {
		name, packed := strings.CutPrefix(row.Collection, bucketCollectionPrefix)
		if !packed {
			if !slices.Contains(legacy, name) {
				legacy = append(legacy, name)
			}
			entries = append(entries, chasm.CollectionEntry{Collection: name, Key: row.Key, Value: row.Value})
			continue
		}
		bucketIDs[name] = append(bucketIDs[name], row.Key)
		err := decodeBucket(row.Value, func(key string, value []byte) {
			entries = append(entries, chasm.CollectionEntry{Collection: name, Key: key, Value: value})
		})
		if err != nil {
			return nil, nil, fmt.Errorf("collection %s, bucket %s: %w", name, row.Key, err)
		}
	}

	// Check each collection's keys: no key twice, and buckets in the canonical layout.
	slices.SortFunc(entries, func(a, b chasm.CollectionEntry) int {
		return strings.Compare(a.Collection, b.Collection)
	})
	var stale staleRows
	stale.legacy = legacy
	for lo := 0; lo < len(entries); {
		name := entries[lo].Collection
		hi := lo + 1
		for hi < len(entries) && entries[hi].Collection == name {
			hi++
		}
		items := make([]packedItem, hi-lo)
		for i, e := range entries[lo:hi] {
			items[i] = packedItem{hash: keyHash(e.Key), key: e.Key}
		}
		sortItems(items)
		for i := 1; i < len(items); i++ {
			if items[i].key == items[i-1].key {
				return nil, nil, fmt.Errorf("collection %s: key %q is stored twice", name, items[i].key)
			}
		}
		stored := bucketIDs[name]
		if len(stored) > 0 && (slices.Contains(legacy, name) || !canonical(items, stored)) {
			for _, id := range stored {
				stale.buckets = append(stale.buckets, persistence.CollectionEntryKey{Collection: bucketCollectionPrefix + name, Key: id})
			}
		}
		lo = hi
	}
	if len(stale.legacy) == 0 && len(stale.buckets) == 0 {
		return entries, nil, nil
	}
	return entries, &stale, nil
}

// canonical reports whether stored bucket ids are the layout of sorted items.
func canonical(items []packedItem, stored []string) bool {
	layout := bucketLayout(itemHashes(items))
	if len(layout) != len(stored) {
		return false
	}
	ids := make(map[string]struct{}, len(layout))
	for _, b := range layout {
		ids[b.id()] = struct{}{}
	}
	for _, id := range stored {
		if _, ok := ids[id]; !ok {
			return false
		}
	}
	return true
}

func itemHashes(items []packedItem) []uint64 {
	hashes := make([]uint64, len(items))
	for i, it := range items {
		hashes[i] = it.hash
	}
	return hashes
}

// packCollectionChanges returns the rows that store m's collection changes to exec (whose
// collections are still the committed ones), and the rewrite of every collection in stale.
func packCollectionChanges(
	exec *chasm.Execution, m *chasm.Mutation, stale *staleRows,
) ([]persistence.CollectionEntry, []persistence.CollectionEntryKey) {
	if len(m.CollectionPuts)+len(m.CollectionDeletes) == 0 {
		return nil, nil
	}
	// Puts and deletes come sorted by (collection, key).
	var names []string
	for _, e := range m.CollectionPuts {
		if len(names) == 0 || names[len(names)-1] != e.Collection {
			names = append(names, e.Collection)
		}
	}
	for _, k := range m.CollectionDeletes {
		if !slices.Contains(names, k.Collection) {
			names = append(names, k.Collection)
		}
	}
	for _, name := range stale.collections() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}

	var (
		puts    []persistence.CollectionEntry
		deletes []persistence.CollectionEntryKey
	)
	for _, name := range names {
		p, d := packCollection(exec, name, collectionSpan(m.CollectionPuts, name), deleteSpan(m.CollectionDeletes, name), stale)
		puts = append(puts, p...)
		deletes = append(deletes, d...)
	}
	return puts, deletes
}

func collectionSpan(puts []chasm.CollectionEntry, name string) []chasm.CollectionEntry {
	lo := sort.Search(len(puts), func(i int) bool { return puts[i].Collection >= name })
	hi := lo
	for hi < len(puts) && puts[hi].Collection == name {
		hi++
	}
	return puts[lo:hi]
}

func deleteSpan(deletes []chasm.CollectionEntryKey, name string) []chasm.CollectionEntryKey {
	lo := sort.Search(len(deletes), func(i int) bool { return deletes[i].Collection >= name })
	hi := lo
	for hi < len(deletes) && deletes[hi].Collection == name {
		hi++
	}
	return deletes[lo:hi]
}

// packCollection returns the rows that store one collection's changes. It sorts only the
// keys' hashes, and gathers and encodes the entries of the buckets it writes: one change to a
// worker with 10,000 bound activities encodes about 32.
func packCollection(
	exec *chasm.Execution, name string, puts []chasm.CollectionEntry, dels []chasm.CollectionEntryKey, stale *staleRows,
) ([]persistence.CollectionEntry, []persistence.CollectionEntryKey) {
	changed := make(map[string]struct{}, len(puts)+len(dels))
	for _, e := range puts {
		changed[e.Key] = struct{}{}
	}
	for _, k := range dels {
		changed[k.Key] = struct{}{}
	}
	n := exec.CollectionLen(name)
	oldHashes := make([]uint64, 0, n)           // the committed collection
	newHashes := make([]uint64, 0, n+len(puts)) // the collection after the change
	exec.RangeCollection(name, func(key string, _ []byte) bool {
		h := keyHash(key)
		oldHashes = append(oldHashes, h)
		if _, ok := changed[key]; !ok {
			newHashes = append(newHashes, h)
		}
		return true
	})
	putHashes := make([]uint64, len(puts))
	for i, e := range puts {
		putHashes[i] = keyHash(e.Key)
		newHashes = append(newHashes, putHashes[i])
	}
	slices.Sort(newHashes)
	layout := bucketLayout(newHashes)
	collection := bucketCollectionPrefix + name

	// bucketOf returns the index of the bucket of layout that covers h, or -1.
	bucketOf := func(h uint64) int {
		// The last bucket starting at or before h is the only one that can cover it.
		i := sort.Search(len(layout), func(i int) bool { return layout[i].prefix<<(64-layout[i].depth) > h }) - 1
		if i >= 0 && layout[i].covers(h) {
			return i
		}
		return -1
	}

	// Which buckets to write, and which rows to delete.
	write := make([]bool, len(layout))
	var deletes []persistence.CollectionEntryKey
	if rewrite := stale.has(name); rewrite {
		putIDs := make(map[string]struct{}, len(layout))
		for i, b := range layout {
			write[i] = true
			putIDs[b.id()] = struct{}{}
		}
		if slices.Contains(stale.legacy, name) {
			exec.RangeCollection(name, func(key string, _ []byte) bool {
				deletes = append(deletes, persistence.CollectionEntryKey{Collection: name, Key: key})
				return true
			})
		}
		for _, k := range stale.buckets {
			if _, ok := putIDs[k.Key]; k.Collection == collection && !ok {
				deletes = append(deletes, k)
			}
		}
	} else {
		// The store holds the layout of the committed keys: write the buckets that hold a
		// changed key or did not exist, delete those that no longer exist.
		slices.Sort(oldHashes)
		type bucketName struct {
			depth  uint
			prefix uint64
		}
		oldLayout := bucketLayout(oldHashes)
		oldIDs := make(map[bucketName]struct{}, len(oldLayout))
		for _, b := range oldLayout {
			oldIDs[bucketName{b.depth, b.prefix}] = struct{}{}
		}
		for _, h := range putHashes {
			write[bucketOf(h)] = true
		}
		for _, k := range dels {
			if i := bucketOf(keyHash(k.Key)); i >= 0 {
				write[i] = true
			}
		}
		newIDs := make(map[bucketName]struct{}, len(layout))
		for i, b := range layout {
			id := bucketName{b.depth, b.prefix}
			newIDs[id] = struct{}{}
			if _, existed := oldIDs[id]; !existed {
				write[i] = true
			}
		}
		for _, b := range oldLayout {
			if _, ok := newIDs[bucketName{b.depth, b.prefix}]; !ok {
				deletes = append(deletes, persistence.CollectionEntryKey{Collection: collection, Key: b.id()})
			}
		}
		slices.SortFunc(deletes, func(a, b persistence.CollectionEntryKey) int { return strings.Compare(a.Key, b.Key) })
	}

	// Gather the entries of the buckets written, each bucket's in key order.
	contents := make(map[int][]packedItem)
	exec.RangeCollection(name, func(key string, value []byte) bool {
		if _, ok := changed[key]; ok {
			return true
		}
		if i := bucketOf(keyHash(key)); write[i] {
			contents[i] = append(contents[i], packedItem{key: key, value: value})
		}
		return true
	})
	for j, e := range puts {
		i := bucketOf(putHashes[j])
		contents[i] = append(contents[i], packedItem{key: e.Key, value: e.Value})
	}
	var rows []persistence.CollectionEntry
	for i, b := range layout {
		if !write[i] {
			continue
		}
		items := contents[i]
		slices.SortFunc(items, func(a, b packedItem) int { return strings.Compare(a.key, b.key) })
		rows = append(rows, persistence.CollectionEntry{Collection: collection, Key: b.id(), Value: encodeBucket(items)})
	}
	return rows, deletes
}
