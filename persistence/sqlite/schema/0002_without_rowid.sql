-- Tables keyed by text IDs keep their rows in the primary key's own B-tree (WITHOUT ROWID):
-- a rowid table keeps them in a second B-tree beside the key's index, so every insert, delete
-- and lookup by key did the work twice. Binding 100 activities is 100 inserts into
-- collection_entries, and a shutdown 100 deletes.

CREATE TABLE collection_entries_v2 (
    namespace_id TEXT   NOT NULL,
    archetype_id BIGINT NOT NULL,
    business_id  TEXT   NOT NULL,
    run_id       TEXT   NOT NULL,
    collection   TEXT   NOT NULL,
    entry_key    TEXT   NOT NULL,
    value        BLOB   NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
) WITHOUT ROWID;
INSERT INTO collection_entries_v2 SELECT namespace_id, archetype_id, business_id, run_id, collection, entry_key, value
    FROM collection_entries;
DROP TABLE collection_entries;
ALTER TABLE collection_entries_v2 RENAME TO collection_entries;

CREATE TABLE current_executions_v2 (
    namespace_id TEXT    NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    NOT NULL,
    shard_id     INTEGER NOT NULL,
    run_id       TEXT    NOT NULL,
    lifecycle    INTEGER NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id)
) WITHOUT ROWID;
INSERT INTO current_executions_v2 SELECT namespace_id, archetype_id, business_id, shard_id, run_id, lifecycle
    FROM current_executions;
DROP TABLE current_executions;
ALTER TABLE current_executions_v2 RENAME TO current_executions;
