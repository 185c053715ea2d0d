"""What a contained tree leaves for the reaper to read: its members' marker, its receipt, its cgroups.

The only part of the containment layer the reaper imports.
"""
