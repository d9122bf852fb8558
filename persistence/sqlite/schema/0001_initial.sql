-- vigil schema 1: cluster metadata, shard ownership, executions and their collections,
-- current-run pointers, timer and outbound tasks.
--
-- Kept to SQL that PostgreSQL also accepts, apart from BLOB (BYTEA there): ON CONFLICT
-- upserts, partial indexes and row-value comparisons all exist in both. Times are int64 unix
-- nanoseconds in UTC, so ordering and precision never depend on a driver's time handling.

CREATE TABLE cluster_metadata (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    num_shards INTEGER NOT NULL CHECK (num_shards > 0)
);

CREATE TABLE shards (
    shard_id INTEGER NOT NULL PRIMARY KEY,
    range_id BIGINT  NOT NULL,
    owner    TEXT    NOT NULL
);

-- The primary key leads with the list order (namespace, archetype, business id, run id), so
-- ListExecutions walks it directly. shard_id is derived from namespace and business id; it is
-- stored so that reads can be checked against the shard that asked.
CREATE TABLE executions (
    namespace_id   TEXT    NOT NULL,
    archetype_id   BIGINT  NOT NULL,
    business_id    TEXT    NOT NULL,
    run_id         TEXT    NOT NULL,
    shard_id       INTEGER NOT NULL,
    db_version     BIGINT  NOT NULL,
    lifecycle      INTEGER NOT NULL,
    state          BLOB    NOT NULL,
    idx_status     TEXT    NOT NULL DEFAULT '',
    idx_task_queue TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id)
);

CREATE INDEX executions_by_status
    ON executions (namespace_id, archetype_id, idx_status, business_id, run_id);
CREATE INDEX executions_by_task_queue
    ON executions (namespace_id, archetype_id, idx_task_queue, business_id, run_id);

CREATE TABLE current_executions (
    namespace_id TEXT    NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    NOT NULL,
    shard_id     INTEGER NOT NULL,
    run_id       TEXT    NOT NULL,
    lifecycle    INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id)
);

-- One row per entry, so that writing an execution's state never rewrites its collections.
CREATE TABLE collection_entries (
    namespace_id TEXT   NOT NULL,
    archetype_id BIGINT NOT NULL,
    business_id  TEXT   NOT NULL,
    run_id       TEXT   NOT NULL,
    collection   TEXT   NOT NULL,
    entry_key    TEXT   NOT NULL,
    value        BLOB   NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
);

CREATE TABLE timer_tasks (
    shard_id        INTEGER NOT NULL,
    visibility_time BIGINT  NOT NULL,
    task_id         BIGINT  NOT NULL,
    namespace_id    TEXT    NOT NULL,
    archetype_id    BIGINT  NOT NULL,
    business_id     TEXT    NOT NULL,
    run_id          TEXT    NOT NULL,
    task_type_id    BIGINT  NOT NULL,
    singleton       INTEGER NOT NULL,
    payload         BLOB    NOT NULL,
    PRIMARY KEY (shard_id, visibility_time, task_id)
);

-- Finds an execution's timers when it is deleted.
CREATE INDEX timer_tasks_by_execution
    ON timer_tasks (namespace_id, archetype_id, business_id, run_id);
-- At most one singleton timer per execution and task type. The write path deletes the old
-- row before inserting the new one; this index makes a bug there loud instead of silent.
CREATE UNIQUE INDEX timer_tasks_singleton
    ON timer_tasks (namespace_id, archetype_id, business_id, run_id, task_type_id)
    WHERE singleton = 1;

CREATE TABLE outbound_tasks (
    shard_id     INTEGER NOT NULL,
    task_id      BIGINT  NOT NULL,
    destination  TEXT    NOT NULL,
    namespace_id TEXT    NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    task_type_id BIGINT  NOT NULL,
    payload      BLOB    NOT NULL,
    -- NULL when the writer left CreatedTime zero.
    created_time BIGINT,
    PRIMARY KEY (shard_id, task_id)
);

CREATE INDEX outbound_tasks_by_execution
    ON outbound_tasks (namespace_id, archetype_id, business_id, run_id);
