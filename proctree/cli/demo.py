"""`proctree demo [-q]`: a short tour of what proctree does, on live processes it starts and cleans up.

A tour is for people to read: there is no --json (asked for, it is a usage
error in text, saying so, rather than a JSON document nobody can use).
"""

import argparse

from ._common import CliError, add_output_options, subcommand


class _NoJson(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help=argparse.SUPPRESS)

    def __call__(self, parser, namespace, values, option_string=None):
        raise CliError(
            "--json is not supported: the demo is a tour for people to read (tree, kill, run, reap and up have --json)",
            usage=parser.format_usage(),
            prog=parser.prog,
        )


def register(sub):
    p = subcommand(
        sub,
        "demo",
        run=run,
        description="A short tour of what proctree does, on live processes it starts and cleans up.",
        statuses=[("0", "every scene did what it shows"), ("1", "a scene failed (its story says how)")],
    )
    add_output_options(p, quiet="one line per scene (a failed scene still tells its whole story)")
    p.add_argument("--json", action=_NoJson)


def run(args):
    from proctree.demo import run_all

    return run_all(quiet=args.quiet)
