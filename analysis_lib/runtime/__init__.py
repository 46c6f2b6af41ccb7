"""Where work runs and is kept: the atomic on-disk cache, thread control, worker processes."""
