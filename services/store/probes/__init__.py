"""Probe results in the database, beside training's (:mod:`services.store.runs`): the job
queue the probe pool drains (:mod:`.queue`), the settings a job computes with
(:mod:`.settings`), the per-submission read model every view shows (:mod:`.report`), and the
idempotent writes both dialects share (:mod:`.sql`). The pool's math and fits stay in
:mod:`workers.probe`; the API, dashboard and CLI read probe results only from here."""
