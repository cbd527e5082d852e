"""The probe pool's runtime: which jobs a submission needs (planner), the worker loop that
claims and commits them (pool), what one job reads and computes (jobs, data, features,
measure, pretext, trial_fits), and the context learner code sees when it loads a checkpoint."""
