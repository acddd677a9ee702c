-- A context is found by the name it was asked as (`?context=256K`: a 256K fitted to the model is
-- measured at 257,984 tokens, methodology §3.1) as well as by its exact tokens, and the runs
-- list ranks the users at one context within each SLO: both through an index.
CREATE INDEX capacity_label_users ON capacity (context_label, max_users);
CREATE INDEX runs_slo ON runs (slo);
