-- vigil schema 4 for PostgreSQL: namespaces, as in the SQLite backend's schema 4. data is the
-- namespace's settings, encoded by the frontend.

CREATE TABLE namespaces (
    name        TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    id          TEXT    COLLATE "C" NOT NULL UNIQUE,
    data        BYTEA   NOT NULL,
    version     BIGINT  NOT NULL,
    create_time BIGINT  NOT NULL,
    update_time BIGINT  NOT NULL
);
