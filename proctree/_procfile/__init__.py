"""The Procfile runner's inputs and rules: the Procfile, .env and settings readers, and foreman's exit rule.

Pure: text and files in, a checked plan (config.load_procfile) or a decision
out. `proctree up` (cli/up.py) is its one user besides the public
load_procfile; every error names its file and line (ProcfileError).

It must never start, signal or wait for a process.
"""
