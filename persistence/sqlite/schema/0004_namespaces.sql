-- vigil schema 4: namespaces, created at run time (RegisterNamespace) or from the static
-- configuration at start. data is the namespace's settings, encoded by the frontend.

CREATE TABLE namespaces (
    name        TEXT    NOT NULL PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    data        BLOB    NOT NULL,
    version     BIGINT  NOT NULL,
    create_time BIGINT  NOT NULL,
    update_time BIGINT  NOT NULL
);
