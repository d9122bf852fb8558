-- vigil schema 6: ExecutionTime, when an execution may first run (an activity's schedule time
-- plus its start delay), as a column of its own, indexed as start_time is, so that a query on
-- ExecutionTime selects what ListActivityExecutions shows in execution_time.
--
-- The stored states alone know each activity's start delay, so the visibility tables are
-- emptied here and rebuilt from them at the first start of this version (BackfillVisibility),
-- as schema 5 first filled them.

ALTER TABLE visibility ADD COLUMN execution_time BIGINT NOT NULL DEFAULT 9223372036854775807;

CREATE INDEX visibility_by_execution_time
    ON visibility (namespace_id, archetype_id, execution_time, business_id, run_id);

DELETE FROM visibility_attributes;
DELETE FROM visibility;
DELETE FROM visibility_backfill;
