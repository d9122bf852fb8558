package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// The pipelined path's statements, besides the ones it shares with the write-by-write path.
const (
	qBegin    = `BEGIN`
	qCommit   = `COMMIT`
	qRollback = `ROLLBACK`
	// qLockShards locks the row of every shard the batch writes to, in one statement. Shard
	// rows are only ever locked FOR SHARE by writers, so the order does not matter for
	// deadlocks; ORDER BY keeps it stable anyway.
	qLockShards = `SELECT shard_id, range_id FROM shards WHERE shard_id = ANY($1) ORDER BY shard_id FOR SHARE`
	// qUpdateExecutions is qUpdateExecution for many executions at once, one array element
	// per write. Its row count is the number of writes whose db_version check passed.
	qUpdateExecutions = `UPDATE executions AS e
		SET db_version = u.next_version, lifecycle = u.lifecycle, state = u.state,
			idx_status = u.idx_status, idx_task_queue = u.idx_task_queue
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::integer[], $6::bigint[], $7::bigint[],
			$8::integer[], $9::bytea[], $10::text[], $11::text[])
			AS u(namespace_id, archetype_id, business_id, run_id, shard_id, prev_version, next_version,
				lifecycle, state, idx_status, idx_task_queue)
		WHERE e.namespace_id = u.namespace_id AND e.archetype_id = u.archetype_id AND e.business_id = u.business_id
		AND e.run_id = u.run_id AND e.shard_id = u.shard_id AND e.db_version = u.prev_version`
	// qClaimFreeCurrents is qClaimFreeCurrent for many business IDs at once. Its row count is
	// the number of claims that found the business ID free.
	qClaimFreeCurrents = `INSERT INTO current_executions (namespace_id, archetype_id, business_id, shard_id, run_id, lifecycle)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[], $5::text[], $6::integer[])
		ON CONFLICT (namespace_id, archetype_id, business_id) DO NOTHING`
	// qInsertExecutions is qInsertExecution for many runs at once.
	qInsertExecutions = `INSERT INTO executions (namespace_id, archetype_id, business_id, run_id, shard_id,
		db_version, lifecycle, state, idx_status, idx_task_queue)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::integer[], $6::bigint[],
			$7::integer[], $8::bytea[], $9::text[], $10::text[])`
	// qPutCollectionEntries and qDeleteCollectionEntries are qPutCollectionEntry and
	// qDeleteCollectionEntry for many entries at once: still one row per entry.
	qPutCollectionEntries = `INSERT INTO collection_entries (namespace_id, archetype_id, business_id, run_id, collection, entry_key, value)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[])
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
		DO UPDATE SET value = excluded.value`
	qDeleteCollectionEntries = `DELETE FROM collection_entries AS c
		USING unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
			AS d(namespace_id, archetype_id, business_id, run_id, collection, entry_key)
		WHERE c.namespace_id = d.namespace_id AND c.archetype_id = d.archetype_id AND c.business_id = d.business_id
		AND c.run_id = d.run_id AND c.collection = d.collection AND c.entry_key = d.entry_key`
	// qInsertTimerTasks is qInsertTimerTask and qUpsertSingletonTimerTask for many tasks at
	// once. A row that is not a singleton is outside the arbiter index, so it only inserts.
	qInsertTimerTasks = `INSERT INTO timer_tasks (shard_id, visibility_time, task_id, namespace_id, archetype_id,
		business_id, run_id, task_type_id, singleton, payload)
		SELECT * FROM unnest($1::integer[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[],
			$7::text[], $8::bigint[], $9::boolean[], $10::bytea[])
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, task_type_id) WHERE singleton
		DO UPDATE SET shard_id = excluded.shard_id, visibility_time = excluded.visibility_time,
			task_id = excluded.task_id, payload = excluded.payload`
)

// errFallBack says the pipelined attempt found a check that failed, or a statement that a
// single write made fail; its transaction was rolled back and the batch must run write by
// write.
var errFallBack = errors.New("a write failed a check; running the batch write by write")

// errFenced says the pipelined attempt found writes to a shard another owner has acquired
// since. Their results are set; the attempt was rolled back, and another pipelined attempt
// without them may commit the rest. A handoff then costs the old owner's batches one more
// round trip, not one per write.
var errFenced = errors.New("writes to a shard owned by another host; running the batch again without them")

// writeBatchPipelined tries the whole batch in one round trip: BEGIN, the shard locks and
// every write's statements go in one pipeline, without savepoints, and the checks are made on
// the answers. If all pass, a second round trip commits. If any fails, the transaction is
// rolled back, nothing applied, and the caller told what to try next: errFenced if writes to a
// shard another host acquired since were among them (their results are set; the rest may go
// pipelined again), otherwise errFallBack: run the batch write by write, which gives each
// failure its precise error and keeps the other writes.
//
// Malformed writes get their error in results and are left out of the pipeline.
//
// Fencing is the same as write by write: the shard rows are locked FOR SHARE before any
// write's statement runs (the lock is the pipeline's first statement after BEGIN), and stay
// locked until COMMIT. A write whose RangeID is not the stored one has run inside the
// pipeline by then, but the check on the answer rolls it back before anything commits.
func (s *Store) writeBatchPipelined(ctx context.Context, conn *pgxpool.Conn, writes []*persistence.ExecutionWrite, results []error) error {
	p := pipeline{writes: writes, results: results}
	shards := make([]int32, 0, 1)
	for i, w := range writes {
		if results[i] != nil {
			continue // failed by an earlier attempt (fenced)
		}
		if err := sqlcommon.ValidateWrite("postgres", w, storableText); err != nil {
			results[i] = err
			continue
		}
		if !slices.Contains(shards, w.ShardID) {
			shards = append(shards, w.ShardID)
		}
	}
	if len(shards) == 0 {
		return nil // every write was malformed
	}

	pb := &pgx.Batch{}
	pb.Queue(qBegin)
	stored := make(map[int32]int64, len(shards))
	pb.Queue(qLockShards, shards).Query(func(rows pgx.Rows) error {
		var shardID int32
		var rangeID int64
		_, err := pgx.ForEachRow(rows, []any{&shardID, &rangeID}, func() error {
			stored[shardID] = rangeID
			return nil
		})
		return err
	})
	p.changed = make([]int64, len(writes))
	if setBased(writes, results) {
		p.updates, p.timers = &updateArrays{}, &timerArrays{}
		p.creates, p.puts, p.deletes = &createArrays{}, &collectionArrays{}, &collectionArrays{}
	}
	for i, w := range writes {
		if results[i] != nil {
			continue
		}
		p.queue(pb, i, w)
	}
	claimed := int64(-1)
	if c := p.creates; c != nil && len(c.namespaceIDs) > 0 {
		pb.Queue(qClaimFreeCurrents, c.namespaceIDs, c.archetypeIDs, c.businessIDs, c.shardIDs, c.runIDs, c.lifecycles).
			Exec(rowsAffected(&claimed))
		pb.Queue(qInsertExecutions, c.namespaceIDs, c.archetypeIDs, c.businessIDs, c.runIDs, c.shardIDs,
			c.versions, c.lifecycles, c.states, c.statuses, c.taskQueues)
	}
	if d := p.deletes; d != nil && len(d.namespaceIDs) > 0 {
		pb.Queue(qDeleteCollectionEntries, d.namespaceIDs, d.archetypeIDs, d.businessIDs, d.runIDs, d.collections, d.keys)
	}
	if c := p.puts; c != nil && len(c.namespaceIDs) > 0 {
		pb.Queue(qPutCollectionEntries, c.namespaceIDs, c.archetypeIDs, c.businessIDs, c.runIDs, c.collections, c.keys, c.values)
	}
	updated := int64(-1)
	if p.updates != nil && len(p.updates.namespaceIDs) > 0 {
		u := p.updates
		pb.Queue(qUpdateExecutions, u.namespaceIDs, u.archetypeIDs, u.businessIDs, u.runIDs, u.shardIDs,
			u.prevVersions, u.nextVersions, u.lifecycles, u.states, u.statuses, u.taskQueues).Exec(rowsAffected(&updated))
	}
	if p.timers != nil && len(p.timers.shardIDs) > 0 {
		t := p.timers
		pb.Queue(qInsertTimerTasks, t.shardIDs, t.visibilityTimes, t.taskIDs, t.namespaceIDs, t.archetypeIDs,
			t.businessIDs, t.runIDs, t.taskTypeIDs, t.singletons, t.payloads)
	}

	err := conn.SendBatch(ctx, pb).Close()
	if err != nil {
		if _, ok := statementError(err); !ok {
			// The connection, the context or the server failed: the batch fails as a whole.
			// The pool discards a connection left inside a transaction.
			return fmt.Errorf("pipeline: %w", err)
		}
		// A statement failed the way a single write can make it fail (bad data, a constraint,
		// a lost race): the transaction is aborted, and write by write finds out which.
		return s.rollBack(ctx, conn, errFallBack)
	}
	// Some update's db_version check failed, or some create found its business ID taken.
	failed := p.updates != nil && len(p.updates.namespaceIDs) > 0 && updated != int64(len(p.updates.namespaceIDs)) ||
		p.creates != nil && len(p.creates.namespaceIDs) > 0 && claimed != int64(len(p.creates.namespaceIDs))
	var fenced []int
	for i, w := range writes {
		if results[i] != nil {
			continue
		}
		// A shard without a row was never acquired: no range_id can match it (a missing key
		// reads as 0, as on the write-by-write path).
		switch st := stored[w.ShardID]; {
		case st > w.RangeID:
			fenced = append(fenced, i)
		case st != w.RangeID, p.changed[i] == 0:
			failed = true
		}
	}
	if len(fenced) > 0 {
		// The shard was acquired by another owner since: range_id only grows, so these
		// writes are refused for good, and the others' checks are worth nothing while the
		// fenced writes ran among them.
		for _, i := range fenced {
			w := writes[i]
			results[i] = &persistence.ShardOwnershipLostError{ShardID: w.ShardID, RangeID: w.RangeID, StoredRangeID: stored[w.ShardID]}
		}
		return s.rollBack(ctx, conn, errFenced)
	}
	if failed {
		return s.rollBack(ctx, conn, errFallBack)
	}
	if s.testHooks.afterFence != nil {
		for _, shardID := range shards {
			s.testHooks.afterFence(shardID)
		}
	}
	ct, err := conn.Exec(ctx, qCommit)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ct.String() != qCommit {
		// PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK, not an error.
		return fmt.Errorf("commit: the transaction was rolled back (%s)", ct.String())
	}
	return nil
}

// rollBack ends a pipelined attempt whose check failed and returns next, which says what to
// try next.
func (s *Store) rollBack(ctx context.Context, conn *pgxpool.Conn, next error) error {
	// Without arguments, Exec uses the simple protocol, which an aborted transaction accepts.
	if _, err := conn.Exec(ctx, qRollback); err != nil {
		return fmt.Errorf("roll back pipelined attempt: %w", err)
	}
	return next
}

// pipeline is the state of one pipelined attempt.
type pipeline struct {
	writes  []*persistence.ExecutionWrite
	results []error
	// changed[i] is the row count of write i's conditional statement: the claim of the
	// business ID for a create, the UPDATE or DELETE conditional on db_version otherwise. It
	// must be 1. An update gathered into updates has its check in that statement's row count
	// instead, and changed[i] = 1.
	changed []int64
	// updates, timers, creates, puts and deletes, when not nil, gather every update's UPDATE,
	// every timer task, every create that expects a free business ID (its claim and its
	// insert), and every collection entry put or deleted, into one statement each (see
	// setBased).
	updates       *updateArrays
	timers        *timerArrays
	creates       *createArrays
	puts, deletes *collectionArrays
}

// setBased reports whether the batch's updates and timer tasks may run as one statement
// each, after the writes' other statements. That reorders statements across writes, and
// changes no outcome as long as no two writes touch the same business ID: each write's rows
// (its execution, current row, collection entries and tasks) are then its own, and a check
// that fails (a version, a key collision) fails the attempt whatever the order. Within one
// statement a row may not be upserted twice, so each write's singleton timer types, and its
// collection entries put, must be distinct too.
func setBased(writes []*persistence.ExecutionWrite, results []error) bool {
	seen := make(map[persistence.CurrentExecutionKey]struct{}, len(writes))
	for i, w := range writes {
		if results[i] != nil {
			continue
		}
		k := w.Key.CurrentKey()
		if _, dup := seen[k]; dup {
			return false
		}
		seen[k] = struct{}{}
		if len(w.CollectionPuts) > 1 {
			keys := make(map[persistence.CollectionEntryKey]struct{}, len(w.CollectionPuts))
			for _, e := range w.CollectionPuts {
				ek := persistence.CollectionEntryKey{Collection: e.Collection, Key: e.Key}
				if _, dup := keys[ek]; dup {
					return false
				}
				keys[ek] = struct{}{}
			}
		}
		singletons := 0
		for _, t := range w.TimerTasks {
			if t.Singleton {
				singletons++
			}
		}
		if singletons > 1 {
			types := make(map[uint32]struct{}, singletons)
			for _, t := range w.TimerTasks {
				if !t.Singleton {
					continue
				}
				if _, dup := types[t.TaskTypeID]; dup {
					return false
				}
				types[t.TaskTypeID] = struct{}{}
			}
		}
	}
	return true
}

// updateArrays are qUpdateExecutions' parameters.
type updateArrays struct {
	namespaceIDs, businessIDs, runIDs, statuses, taskQueues []string
	archetypeIDs, prevVersions, nextVersions                []int64
	shardIDs, lifecycles                                    []int32
	states                                                  [][]byte
}

func (u *updateArrays) add(w *persistence.ExecutionWrite) {
	k := w.Key
	u.namespaceIDs = append(u.namespaceIDs, k.NamespaceID)
	u.archetypeIDs = append(u.archetypeIDs, int64(k.ArchetypeID))
	u.businessIDs = append(u.businessIDs, k.BusinessID)
	u.runIDs = append(u.runIDs, k.RunID)
	u.shardIDs = append(u.shardIDs, w.ShardID)
	u.prevVersions = append(u.prevVersions, w.PrevDBVersion)
	u.nextVersions = append(u.nextVersions, w.NextDBVersion)
	u.lifecycles = append(u.lifecycles, int32(w.Lifecycle))
	u.states = append(u.states, sqlcommon.NonNil(w.State))
	u.statuses = append(u.statuses, w.Indexed.Status)
	u.taskQueues = append(u.taskQueues, w.Indexed.TaskQueue)
}

// createArrays are qClaimFreeCurrents' and qInsertExecutions' parameters.
type createArrays struct {
	namespaceIDs, businessIDs, runIDs, statuses, taskQueues []string
	archetypeIDs, versions                                  []int64
	shardIDs, lifecycles                                    []int32
	states                                                  [][]byte
}

func (c *createArrays) add(w *persistence.ExecutionWrite) {
	k := w.Key
	c.namespaceIDs = append(c.namespaceIDs, k.NamespaceID)
	c.archetypeIDs = append(c.archetypeIDs, int64(k.ArchetypeID))
	c.businessIDs = append(c.businessIDs, k.BusinessID)
	c.runIDs = append(c.runIDs, k.RunID)
	c.shardIDs = append(c.shardIDs, w.ShardID)
	c.versions = append(c.versions, w.NextDBVersion)
	c.lifecycles = append(c.lifecycles, int32(w.Lifecycle))
	c.states = append(c.states, sqlcommon.NonNil(w.State))
	c.statuses = append(c.statuses, w.Indexed.Status)
	c.taskQueues = append(c.taskQueues, w.Indexed.TaskQueue)
}

// collectionArrays are qPutCollectionEntries' parameters, or qDeleteCollectionEntries' (no
// values).
type collectionArrays struct {
	namespaceIDs, businessIDs, runIDs, collections, keys []string
	archetypeIDs                                         []int64
	values                                               [][]byte
}

func (c *collectionArrays) add(k persistence.ExecutionKey, collection, key string) {
	c.namespaceIDs = append(c.namespaceIDs, k.NamespaceID)
	c.archetypeIDs = append(c.archetypeIDs, int64(k.ArchetypeID))
	c.businessIDs = append(c.businessIDs, k.BusinessID)
	c.runIDs = append(c.runIDs, k.RunID)
	c.collections = append(c.collections, collection)
	c.keys = append(c.keys, key)
}

// timerArrays are qInsertTimerTasks' parameters.
type timerArrays struct {
	shardIDs                               []int32
	visibilityTimes, taskIDs, archetypeIDs []int64
	taskTypeIDs                            []int64
	namespaceIDs, businessIDs, runIDs      []string
	singletons                             []bool
	payloads                               [][]byte
}

func (a *timerArrays) add(w *persistence.ExecutionWrite) {
	for _, t := range w.TimerTasks {
		e := t.Execution
		vis, _ := sqlcommon.TimeToNanos(t.VisibilityTime) // range checked by ValidateWrite
		a.shardIDs = append(a.shardIDs, w.ShardID)
		a.visibilityTimes = append(a.visibilityTimes, vis)
		a.taskIDs = append(a.taskIDs, t.TaskID)
		a.namespaceIDs = append(a.namespaceIDs, e.NamespaceID)
		a.archetypeIDs = append(a.archetypeIDs, int64(e.ArchetypeID))
		a.businessIDs = append(a.businessIDs, e.BusinessID)
		a.runIDs = append(a.runIDs, e.RunID)
		a.taskTypeIDs = append(a.taskTypeIDs, int64(t.TaskTypeID))
		a.singletons = append(a.singletons, t.Singleton)
		a.payloads = append(a.payloads, sqlcommon.NonNil(t.Payload))
	}
}

// queue appends write i's statements: the same as the write-by-write path's, without the
// savepoint and without the reads that only explain a failure.
func (p *pipeline) queue(pb *pgx.Batch, i int, w *persistence.ExecutionWrite) {
	k := w.Key
	changed := &p.changed[i]
	switch w.Mode {
	case persistence.WriteModeCreate:
		// A run that exists already fails the insert (its primary key); a business ID held by
		// another run than the expected one fails the claim.
		if w.ExpectedCurrentRunID == "" && p.creates != nil {
			p.creates.add(w)
			*changed = 1 // checked by the row count of qClaimFreeCurrents
			break
		}
		if w.ExpectedCurrentRunID == "" {
			pb.Queue(qClaimFreeCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle).
				Exec(rowsAffected(changed))
		} else {
			pb.Queue(qTakeOverCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle,
				w.ExpectedCurrentRunID).Exec(rowsAffected(changed))
		}
		pb.Queue(qInsertExecution, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID,
			w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue)
	case persistence.WriteModeUpdate:
		if p.updates != nil {
			p.updates.add(w)
			*changed = 1
		} else {
			pb.Queue(qUpdateExecution,
				w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue,
				k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion).
				Exec(rowsAffected(changed))
		}
		// A writer that says the lifecycle did not change saves keeping the current row in step.
		if w.PrevLifecycle == nil || *w.PrevLifecycle != w.Lifecycle {
			pb.Queue(qUpdateCurrentLifecycle, w.Lifecycle, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID)
		}
	default: // ValidateWrite admits no other mode
		queueDelete(pb, w, changed)
		return
	}
	queueVisibility(pb, w)
	if p.timers == nil {
		queueCollections(pb, w)
		queueTasks(pb, w)
		return
	}
	for _, e := range w.CollectionPuts {
		p.puts.add(k, e.Collection, e.Key)
		p.puts.values = append(p.puts.values, sqlcommon.NonNil(e.Value))
	}
	for _, d := range w.CollectionDeletes {
		p.deletes.add(k, d.Collection, d.Key)
	}
	p.timers.add(w)
	queueOutboundTasks(pb, w)
}
