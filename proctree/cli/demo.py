"""`proctree demo`: a short tour of what proctree does, on live processes it starts and cleans up."""


def register(sub):
    p = sub.add_parser("demo", help="a short tour on live processes it starts and cleans up")
    p.set_defaults(run=run)


def run(args):
    from proctree.demo import run_all

    return run_all()
