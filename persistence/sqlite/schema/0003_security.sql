-- vigil schema 3: credentials. API keys are stored as the SHA-256 of the key, never the key;
-- cluster keys sign task tokens (the newest signs, all verify).

CREATE TABLE api_keys (
    id          TEXT    NOT NULL PRIMARY KEY,
    key_hash    BLOB    NOT NULL UNIQUE,
    namespace   TEXT    NOT NULL,
    roles       TEXT    NOT NULL,
    description TEXT    NOT NULL,
    create_time BIGINT  NOT NULL,
    revoke_time BIGINT  NOT NULL
);

CREATE TABLE cluster_keys (
    version     INTEGER NOT NULL PRIMARY KEY,
    secret      BLOB    NOT NULL,
    create_time BIGINT  NOT NULL
);
