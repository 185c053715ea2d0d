"""The supervisor layer: long-running services and short foreground commands over contained trees.

`Supervisor` (supervisor.py) starts services as contained trees
(proctree.spawn_async), reads their merged output into a bounded ring
(logring.py), decides readiness (readiness.py), orders starts by dependency
(deps.py), restarts with backoff (restart.py), and reports every change as an
immutable snapshot to isolated listeners (events.py). Foreground commands
(foreground.py) are kept apart from services. `proctree up`'s readers are
their own package, proctree/_procfile/.

This layer must never signal a process that is not a member of a tree it
spawned, never reuse a service id, and never decide a status by which event
arrived first: a service we stopped is `stopped`, whatever its exit looked like.
"""
