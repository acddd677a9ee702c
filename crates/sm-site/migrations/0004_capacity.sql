-- The capacity answer of every run (methodology §11.3), so the runs list can
-- filter by a context and sort by the users it serves there in SQL. The SLO
-- the answer used and what the cells were judged from: 'requests' (each
-- request's own figures, as the run measured them) or 'summaries' (the cells'
-- p50/p90/p99 figures, after the fact: runs written before
-- speedmatrix.run/1.1, imported reference-tool files). '' marks a run stored
-- before this migration, whose answer the site works out when it starts.
ALTER TABLE runs ADD COLUMN slo TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN judged_from TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_judged_from ON runs (judged_from);
-- One row per decode context of a run. Column names differ from runs' own,
-- so the two join without qualifying the list's filters.
CREATE TABLE capacity (
    run_id TEXT NOT NULL REFERENCES runs (id),
    context BIGINT NOT NULL,
    context_label TEXT NOT NULL,
    max_users BIGINT NOT NULL,
    bounded_by TEXT NOT NULL,
    PRIMARY KEY (run_id, context)
);
CREATE INDEX capacity_context_users ON capacity (context, max_users);
