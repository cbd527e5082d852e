"""The coordinator: REST API, causal scheduler, reaper and execution backends.

Public face:

- :func:`services.coordinator.app.create_app` builds the FastAPI app (``nevis serve``);
- :class:`services.coordinator.scheduler.loop.Scheduler` claims, launches and reaps tasks;
- :func:`services.coordinator.backends.make_backend` picks ``local``, ``ray`` or ``kuberay``;
- :func:`services.coordinator.worker.run_task` is the worker harness every backend starts.

Everything else (``crud``, ``api``, ``scheduler.leases``) is internal.
"""
