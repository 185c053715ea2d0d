"""The Procfile runner's inputs and rules: the Procfile, .env and settings readers, and foreman's exit rule.

Pure: text and files in, a checked plan (config.load_procfile) or a decision
out. Its public face is proctree.procfile (proctree/procfile.py), which
`proctree up` and `proctree check` use; every error names its file and line
(ProcfileError).

It must never start, signal or wait for a process.
"""
