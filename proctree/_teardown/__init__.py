"""The teardown layer: end a process tree, and nothing else.

engine is the state machine and its sync and asyncio drivers; membership
decides, on one snapshot, what belongs to the tree; signals sends only to
recorded identities (pidfd, start-time check); exitwait observes exits
without reaping; report is the TeardownReport.

Must never: signal pid 0, pid 1, the caller or its ancestors; reap a wait
status that belongs to the caller's objects unless asked (reap=True); import
the compiled module (it reads the table through proctree._table).
"""
