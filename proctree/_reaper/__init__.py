"""The reaper layer: find and end processes whose owner is provably gone, and nothing else.

facts gathers the evidence from the system into one model (Facts): the table,
each process's PROCTREE_OWNER marker (read in C), leftover proctree cgroups,
receipts, and the command lines of rule candidates. select decides on a
Facts alone (pure, tested on synthetic tables); rules holds the argv rules
for helpers that scrub their environment; reap drives find_orphans and
reap_orphans, ending what select chose with the teardown engine.

Must never: treat an unreadable fact as proof that an owner is gone; signal
anything select did not choose (the engine's guard protects every other
process of the snapshot); signal pid 0, 1, the caller or its ancestors.
"""
