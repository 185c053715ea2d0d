"""The table layer: what the process table says, read through the C core.

binding is the one importer of the compiled module (proctree._core): it turns
the core's -errno returns into exceptions and its rows into Proc records.
model holds Proc and Snapshot (pure Python, no system calls); live walks one
subtree without scanning the whole table.

Must never: send a signal, decide what belongs to a tree, or keep state
between calls beyond a buffer-size hint.
"""
