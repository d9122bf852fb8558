-- The live hosts of a cluster sharing this database (Temporal's cluster_membership is the
-- model). A host renews its row every membership heartbeat; a row whose expiry is behind the
-- database's clock is a dead host. Times are the database's, so hosts need not agree on theirs.
CREATE TABLE cluster_membership (
    host_id          TEXT        COLLATE "C" NOT NULL PRIMARY KEY,
    history_address  TEXT        NOT NULL,
    frontend_address TEXT        NOT NULL,
    start_time       TIMESTAMPTZ NOT NULL,
    last_renewal     TIMESTAMPTZ NOT NULL,
    expiry           TIMESTAMPTZ NOT NULL
);

-- Set by an owner that stopped serving a shard cleanly (graceful stop or handoff), cleared by
-- the next acquisition: the next owner needs no restart grace for such a shard.
ALTER TABLE shards ADD COLUMN released BOOLEAN NOT NULL DEFAULT FALSE;
