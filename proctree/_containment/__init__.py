"""The containment layer: spawn trees that cannot leak, and end them.

spawn holds spawn(), spawn_async() and Tree (the owner's side); the keeper,
the process that holds a tree together (session leader, subreaper, owner-death
watch), is a separate C program (csrc/keeper/, built into the package as
proctree-keeper) that the owner speaks to through protocol only; owner holds
the owner's own teardowns; cgroup and marker are the mechanisms both sides
share (cgroup v2, the PROCTREE_OWNER and PROCTREE_TREE markers); receipt and
leftovers are what the reaper reads.

Must never: signal a process that is not a verified member of a tree it
started (by identity, or by membership of a cgroup it made).
"""
