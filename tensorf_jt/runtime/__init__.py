"""How the process runs: MPI ranks, Jittor's memory, seeding, signals, Jittor's errors made
actionable, and the per-stage profiler."""
