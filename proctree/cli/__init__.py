"""The `proctree` command: thin subcommands over the library, no logic of their own.

Each subcommand lives in its own module with register(subparsers), which adds
its parser and sets `run` (a function of the parsed args returning an exit code).
"""
import argparse
import importlib
import sys

# Subcommand modules, in the order `proctree --help` lists them.
SUBCOMMANDS = ["tree", "kill", "run", "demo"]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="proctree",
        description="Stop a process and everything it started, and nothing else.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"proctree.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"proctree.cli.{name}":
                raise
            continue  # not built yet on this branch
        module.register(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
