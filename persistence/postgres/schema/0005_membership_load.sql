-- vigil schema 5 for PostgreSQL: each host's load report rides on its membership row, so that
-- the expiry brake of every host weighs the heartbeats any host refused (history.ClusterLoad).
-- Opaque to the store; empty from a host that does not report.
ALTER TABLE cluster_membership ADD COLUMN load BYTEA NOT NULL DEFAULT ''::bytea;
