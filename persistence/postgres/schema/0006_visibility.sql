-- vigil schema 6 for PostgreSQL: visibility, what listings filter, sort and page by without
-- decoding state (persistence/internal/sqlcommon/visibility.go compiles the queries). The same
-- tables as SQLite's schema 5; text is COLLATE "C" so that order and STARTS_WITH ranges are
-- byte order.
--
-- visibility holds one row per execution with a visibility record, written in the same
-- transaction as the execution's state. Each column a query filters or sorts by has an index
-- after (namespace, archetype) and before the execution's key, so an equality, a range or an
-- ORDER BY of it is one index walk that keyset pagination continues. Unknown times and
-- durations are 9223372036854775807 (the largest value), not NULL: they sort last ascending
-- and first descending in every index, and predicates exclude them.
--
-- visibility_attributes holds the custom search attributes: a row per attribute (ord 0) with
-- its value in the column of its type (str_value for Keyword, Text and Datetime, as
-- fixed-width UTC text; int_value for Int and Bool; dbl_value for Double), and a row per
-- KeywordList element or Text word (ord 1, 2, ...). value_type is the type the value was
-- stored with; a query names the type the attribute is registered with now.
--
-- The tables start empty: the first start of this version fills them from the executions'
-- states (BackfillVisibility), recording each archetype done in visibility_backfill.

CREATE TABLE visibility (
    namespace_id        TEXT    COLLATE "C" NOT NULL,
    archetype_id        BIGINT  NOT NULL,
    business_id         TEXT    COLLATE "C" NOT NULL,
    run_id              TEXT    COLLATE "C" NOT NULL,
    type_name           TEXT    COLLATE "C" NOT NULL,
    task_queue          TEXT    COLLATE "C" NOT NULL,
    worker_instance_key TEXT    COLLATE "C" NOT NULL,
    status              INTEGER NOT NULL,
    start_time          BIGINT  NOT NULL,
    close_time          BIGINT  NOT NULL,
    execution_duration  BIGINT  NOT NULL,
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id)
);

CREATE INDEX visibility_by_start_time
    ON visibility (namespace_id, archetype_id, start_time, business_id, run_id);
CREATE INDEX visibility_by_close_time
    ON visibility (namespace_id, archetype_id, close_time, business_id, run_id);
CREATE INDEX visibility_by_status
    ON visibility (namespace_id, archetype_id, status, business_id, run_id);
CREATE INDEX visibility_by_task_queue
    ON visibility (namespace_id, archetype_id, task_queue, business_id, run_id);
CREATE INDEX visibility_by_type_name
    ON visibility (namespace_id, archetype_id, type_name, business_id, run_id);
CREATE INDEX visibility_by_worker
    ON visibility (namespace_id, archetype_id, worker_instance_key, business_id, run_id);

CREATE TABLE visibility_attributes (
    namespace_id TEXT    COLLATE "C" NOT NULL,
    archetype_id BIGINT  NOT NULL,
    business_id  TEXT    COLLATE "C" NOT NULL,
    run_id       TEXT    COLLATE "C" NOT NULL,
    name         TEXT    COLLATE "C" NOT NULL,
    ord          INTEGER NOT NULL,
    value_type   INTEGER NOT NULL,
    str_value    TEXT COLLATE "C",
    int_value    BIGINT,
    dbl_value    DOUBLE PRECISION,
    PRIMARY KEY (namespace_id, archetype_id, business_id, run_id, name, ord)
);

CREATE INDEX visibility_attributes_by_str
    ON visibility_attributes (namespace_id, archetype_id, name, value_type, str_value, business_id, run_id)
    WHERE str_value IS NOT NULL;
CREATE INDEX visibility_attributes_by_int
    ON visibility_attributes (namespace_id, archetype_id, name, value_type, int_value, business_id, run_id)
    WHERE int_value IS NOT NULL;
CREATE INDEX visibility_attributes_by_dbl
    ON visibility_attributes (namespace_id, archetype_id, name, value_type, dbl_value, business_id, run_id)
    WHERE dbl_value IS NOT NULL;

CREATE TABLE visibility_backfill (
    archetype_id BIGINT NOT NULL PRIMARY KEY
);
