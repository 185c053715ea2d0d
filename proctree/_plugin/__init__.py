"""The pytest plugin's parts (the entry point is proctree/pytest_plugin.py), one job per module.

- settings.py: the options, the ini settings and the mode of a test;
- describe.py: how a leaked process is named, and whether it still runs;
- helpers.py: processes that are never a test's leak (the stdlib's helpers, proctree.Popen's holder,
  pytest-xdist's workers as the controller started them);
- held.py: processes a live object still holds (a Popen, an asyncio process, a multiprocessing object);
- lineage.py: who a process belongs to by its ancestry (a fixture's tag in the environment it inherited);
- guard.py: the run's containment and the checks around each test, fixture and the session.

A layer-6 face: the public API, and proctree.Popen's holder (helpers.py; the allowlist in
tests/project/test_architecture.py says why).
"""
