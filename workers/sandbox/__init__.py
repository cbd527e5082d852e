"""The learner process: the only place learner code runs.

Harness code (the runner, its executors, the probe pool) never imports a learner. It starts a
*learner host* (:mod:`.host`) in a sandbox (:mod:`.launch`: bubblewrap, no network, no other
processes, no data folder, no credentials) and talks to it over a pipe with a wire format that
carries JSON and numeric arrays only (:mod:`.wire`), never pickles. What runs beside learner
code inside the host (the trial context, the FLOP meter) lives here too.
"""
