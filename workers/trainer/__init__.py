"""Per-task training jobs: trials, FLOP accounting, evaluation."""
