-- vigil schema 1 for PostgreSQL: the same tables, keys and indexes as the SQLite backend's
-- schema 1, so the two backends answer every query alike.
--
-- Differences from SQLite, each for a reason:
--   * BYTEA for blobs, BOOLEAN for timer_tasks.singleton.
--   * Every TEXT column is COLLATE "C": listing order (business_id, run_id) and collection
--     order must be byte order, as in SQLite, whatever the database's default collation is.
--     "C" also makes the comparisons cheaper.
--   * Times stay int64 unix nanoseconds (BIGINT) in UTC: timestamptz has only microseconds.
--
-- The migration runs with search_path set to the configured schema, so names are unqualified.

CREATE TABLE cluster_metadata (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    num_shards INTEGER NOT NULL CHECK (num_shards > 0)
);

-- A host owns a shard while the range_id it acquired is the stored one. Writes take this row
-- FOR SHARE for the life of their transaction, and AcquireShard updates it, so the two
-- serialise: a new owner's range_id is never stored while an old owner's write is in flight.
CREATE TABLE shards (
    shard_id INTEGER NOT NULL PRIMARY KEY,
    range_id BIGINT  NOT NULL,
    owner    TEXT    COLLATE "C" NOT NULL
);

-- The primary key leads with the list order (namespace, archetype, business id, run id), so
-- ListExecutions walks it directly.
CREATE TABLE executions (
    namespace_id   TEXT    COLLATE "C" NOT NULL,
    archetype_id   BIGINT  NOT NULL,
    business_id    TEXT    COLLATE "C" NOT NULL,
    run_id         TEXT    COLLATE "C" NOT NULL,
    shard_id       INTEGER NOT NULL,
    db_version     BIGINT  NOT NULL,
    lifecycle      INTEGER NOT NULL,
    state          BYTEA   NOT NULL,
    idx_status     TEXT    COLLATE "C" NOT NULL DEFAULT '',
    idx_task_queue TEXT    COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id)
);

CREATE INDEX executions_by_status
    ON executions (namespace_id, archetype_id, idx_status, business_id, run_id);
CREATE INDEX executions_by_task_queue
    ON executions (namespace_id, archetype_id, idx_task_queue, business_id, run_id);

CREATE TABLE current_executions (
    namespace_id TEXT    COLLATE "C" NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    COLLATE "C" NOT NULL,
    shard_id     INTEGER NOT NULL,
    run_id       TEXT    COLLATE "C" NOT NULL,
    lifecycle    INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id)
);

-- One row per entry, so that writing an execution's state never rewrites its collections.
CREATE TABLE collection_entries (
    namespace_id TEXT   COLLATE "C" NOT NULL,
    archetype_id BIGINT NOT NULL,
    business_id  TEXT   COLLATE "C" NOT NULL,
    run_id       TEXT   COLLATE "C" NOT NULL,
    collection   TEXT   COLLATE "C" NOT NULL,
    entry_key    TEXT   COLLATE "C" NOT NULL,
    value        BYTEA  NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
);

CREATE TABLE timer_tasks (
    shard_id        INTEGER NOT NULL,
    visibility_time BIGINT  NOT NULL,
    task_id         BIGINT  NOT NULL,
    namespace_id    TEXT    COLLATE "C" NOT NULL,
    archetype_id    BIGINT  NOT NULL,
    business_id     TEXT    COLLATE "C" NOT NULL,
    run_id          TEXT    COLLATE "C" NOT NULL,
    task_type_id    BIGINT  NOT NULL,
    singleton       BOOLEAN NOT NULL,
    payload         BYTEA   NOT NULL,
    PRIMARY KEY (shard_id, visibility_time, task_id)
);

-- Finds an execution's timers when it is deleted.
CREATE INDEX timer_tasks_by_execution
    ON timer_tasks (namespace_id, archetype_id, business_id, run_id);
-- At most one singleton timer per execution and task type. The write path upserts on this
-- index (ON CONFLICT ... WHERE singleton), so a new singleton replaces the stored one in place.
CREATE UNIQUE INDEX timer_tasks_singleton
    ON timer_tasks (namespace_id, archetype_id, business_id, run_id, task_type_id)
    WHERE singleton;

CREATE TABLE outbound_tasks (
    shard_id     INTEGER NOT NULL,
    task_id      BIGINT  NOT NULL,
    destination  TEXT    COLLATE "C" NOT NULL,
    namespace_id TEXT    COLLATE "C" NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    COLLATE "C" NOT NULL,
    run_id       TEXT    COLLATE "C" NOT NULL,
    task_type_id BIGINT  NOT NULL,
    payload      BYTEA   NOT NULL,
    -- NULL when the writer left CreatedTime zero.
    created_time BIGINT,
    PRIMARY KEY (shard_id, task_id)
);

CREATE INDEX outbound_tasks_by_execution
    ON outbound_tasks (namespace_id, archetype_id, business_id, run_id);
