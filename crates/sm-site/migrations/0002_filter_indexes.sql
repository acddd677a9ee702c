-- Indexes for the exact filters of the runs list: the GPU count and the engine
-- version were only the second column of composite indexes, which a filter on
-- them alone cannot use.
CREATE INDEX runs_gpu_count ON runs (gpu_count);
CREATE INDEX runs_engine_version ON runs (engine_version);
