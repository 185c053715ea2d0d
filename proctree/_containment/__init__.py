"""The containment layer: spawn trees that cannot leak, and end them.

spawn holds spawn(), spawn_async() and Tree (the owner's side); keeper is the
process that holds a tree together (session leader, subreaper, owner-death
watch), started as a separate program; cgroup, marker and ownerwatch are its
mechanisms (cgroup v2, the PROCTREE_OWNER marker, owner-death hooks).

Must never: signal a process that is not a verified member of a tree it
started (by identity, or by membership of a cgroup it made). keeper, cgroup
and ownerwatch are loaded by the keeper as plain files: stdlib only, no
imports from the rest of the package at import time.
"""
