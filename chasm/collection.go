package chasm

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
)

// Collection is a typed handle on one of a component's keyed collections. Entries are kept
// beside the state message: a transaction hands the engine only the entries it put or
// deleted, so a worker with 10,000 bound activities pays nothing for them on a plain
// heartbeat (the durable host stores them packed, a few dozen to a row, and rewrites only the
// rows holding a changed entry). Declare the handle once at package level and the name, an
// identifier, with WithCollections.
type Collection[V proto.Message] struct {
	name     string
	newValue func() V
}

// NewCollection returns a handle on the collection called name with values of type V.
func NewCollection[V proto.Message](name string) Collection[V] {
	var zero V
	msgType := zero.ProtoReflect().Type()
	return Collection[V]{
		name:     name,
		newValue: func() V { return msgType.New().Interface().(V) },
	}
}

// Name returns the collection's name.
func (c Collection[V]) Name() string { return c.name }

// Get returns the entry at key.
func (c Collection[V]) Get(ctx Context, key string) (V, bool, error) {
	var zero V
	t := ctx.txn()
	if err := t.checkCollection(c.name); err != nil {
		return zero, false, err
	}
	data, ok := t.collectionGet(c.name, key)
	if !ok {
		return zero, false, nil
	}
	v, err := c.decode(t, key, data)
	if err != nil {
		return zero, false, err
	}
	return v, true, nil
}

// Has reports whether an entry exists at key, without decoding it.
func (c Collection[V]) Has(ctx Context, key string) bool {
	_, ok := ctx.txn().collectionGet(c.name, key)
	return ok
}

// Len returns the number of entries.
func (c Collection[V]) Len(ctx Context) int {
	return ctx.txn().collectionLen(c.name)
}

// Keys returns every key, sorted.
func (c Collection[V]) Keys(ctx Context) []string {
	keys := ctx.txn().collectionKeys(c.name)
	slices.Sort(keys)
	return keys
}

// Range calls fn for every entry in key order until fn returns false.
func (c Collection[V]) Range(ctx Context, fn func(key string, value V) bool) error {
	t := ctx.txn()
	if err := t.checkCollection(c.name); err != nil {
		return err
	}
	for _, key := range c.Keys(ctx) {
		data, _ := t.collectionGet(c.name, key)
		v, err := c.decode(t, key, data)
		if err != nil {
			return err
		}
		if !fn(key, v) {
			return nil
		}
	}
	return nil
}

// Put inserts or replaces the entry at key.
func (c Collection[V]) Put(ctx MutableContext, key string, value V) {
	t := ctx.txn()
	if err := t.checkCollection(c.name); err != nil {
		t.fail(err)
		return
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(value)
	if err != nil {
		t.fail(fmt.Errorf("chasm: encode %s[%q]: %w", c.name, key, err))
		return
	}
	t.collectionPut(c.name, key, data)
}

// Delete removes the entry at key; a missing entry is not an error.
func (c Collection[V]) Delete(ctx MutableContext, key string) {
	t := ctx.txn()
	if err := t.checkCollection(c.name); err != nil {
		t.fail(err)
		return
	}
	t.collectionDelete(c.name, key)
}

func (c Collection[V]) decode(t *transaction, key string, data []byte) (V, error) {
	v := c.newValue()
	if err := proto.Unmarshal(data, v); err != nil {
		var zero V
		return zero, fmt.Errorf("chasm: execution %s: decode %s[%q]: %w", t.exec.key, c.name, key, err)
	}
	return v, nil
}
