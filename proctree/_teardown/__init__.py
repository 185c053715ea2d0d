"""The teardown layer: end a process tree, and nothing else.

ladder is the one Python teardown ladder (the rungs every teardown climbs);
machine climbs it for a tree from a root (_Teardown), listed for members the
kernel lists, a cgroup's (_ListedTeardown, given a ListedWorld); engine holds
their sync and asyncio drivers (terminate_tree, terminate_tree_async); world is every system call
the machine makes, behind one object (System, or a fake in tests); membership
decides, on one snapshot, what belongs to the tree; signals sends only to
recorded identities (pidfd, start-time check); exitwait observes exits
without reaping; reaping reaps the caller's own children when asked; report
is the TeardownReport.

Must never: signal pid 0, pid 1, the caller or its ancestors; reap a wait
status that belongs to the caller's objects unless asked (reap=True); import
the compiled module (it reads the table through proctree._table).
"""
