-- vigil schema 2 for PostgreSQL: credentials, as in the SQLite backend's schema 3. API keys
-- are stored as the SHA-256 of the key, never the key; cluster keys sign task tokens.

CREATE TABLE api_keys (
    id          TEXT    COLLATE "C" NOT NULL PRIMARY KEY,
    key_hash    BYTEA   NOT NULL UNIQUE,
    namespace   TEXT    COLLATE "C" NOT NULL,
    roles       TEXT    COLLATE "C" NOT NULL,
    description TEXT    NOT NULL,
    create_time BIGINT  NOT NULL,
    revoke_time BIGINT  NOT NULL
);

CREATE TABLE cluster_keys (
    version     INTEGER NOT NULL PRIMARY KEY,
    secret      BYTEA   NOT NULL,
    create_time BIGINT  NOT NULL
);
