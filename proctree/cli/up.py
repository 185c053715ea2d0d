"""`proctree up [-f Procfile] [-d DIR] [-e .env] [-m web=2,worker=1] [--grace S] [--exit-with NAME] [--strict]
[--no-prefix] [--no-colour] [-q [NAMES]] [--json] [--stats SECONDS] [NAME...]`

A Procfile runner that foreman and honcho users can switch to unchanged: each
entry runs as a service of proctree.Supervisor (a contained tree), its output
prefixed with its aligned, coloured name, with a line when it is ready (and
where), restarts or ends. As in foreman, one entry's end stops the rest
(unless its settings say can_die); with --exit-with NAME the run ends when
NAME does, with NAME's status (a test runner between services). Ctrl+C,
SIGTERM or SIGHUP stop everything within the grace (a second Ctrl+C ends it
at once), then up says what it stopped and that nothing is left, and exits
130 / 143 / 129, or with the status of the entry whose end stopped the run.
--stats SECONDS prints, that often, each live entry's summed usage (its
tree's processes, memory and CPU), read only then: nothing is read otherwise.

The plan (Procfile, .env, scale, settings) is read and checked whole before
anything starts; every error names its file and line. What honcho would skip
silently (a line it cannot read, a missing -e file) is skipped with a warning
naming the file and line, or refused under --strict. honcho's own options
(-q NAMES, --no-prefix, -d, --no-colour, PROCFILE) mean what they mean there.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Any

import proctree
from proctree._validate import MAX_STOP_GRACE

from . import _upview, _usageview
from ._common import CliError, discard_output, parse_seconds, parse_signal, shown, subcommand
from ._plan import add_plan_options, add_strict_option, load_plan

# Output backpressure: once this many rows of one service wait to be written, its pipe is no
# longer read (it blocks, as under foreman) until they are down to the low mark.
HIGH_ROWS = 20000
LOW_ROWS = 5000

# The signals that end the run, and the status each one gives (128 + N, as a shell reports it).
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# An entry's lines reach the terminal within this many seconds (the supervisor's default, 50 ms,
# is for programs; foreman and honcho relay each line as it comes). Rows still go out in batches.
OUTPUT_INTERVAL = 0.01
SIGPIPE_STATUS = 128 + signal.SIGPIPE


def register(sub):
    p = subcommand(
        sub,
        "up",
        run=run,
        statuses=[
            ("N", "the status of the entry whose end ended the run (--exit-with NAME: NAME's); 128+N for a signal N"),
            ("0", "every entry ended by itself with status 0"),
            (
                "2",
                "bad input (the Procfile, .env, settings or options; nothing was started), or the entries "
                "could not be started",
            ),
            ("129", "stopped by SIGHUP"),
            ("130", "stopped by SIGINT (Ctrl+C)"),
            ("143", "stopped by SIGTERM"),
            ("141", "stdout was closed (SIGPIPE)"),
        ],
        description="Run the entries of a Procfile (foreman/honcho format) as contained services, "
        "their output prefixed with their names. One entry's end stops the rest (unless it can_die); "
        "Ctrl+C, SIGTERM or SIGHUP stop everything within --grace, and nothing is left running. "
        "Richer settings (ready, depends_on, restart, env, can_die, port, cwd) come from "
        "[tool.proctree.services.NAME] in pyproject.toml or [services.NAME] in proctree.toml beside the Procfile.",
    )
    add_plan_options(p)
    p.add_argument(
        "--grace",
        "-t",
        "--timeout",
        dest="grace",
        type=_parse_grace,
        default=3.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when stopping (default 3; -t/--timeout is foreman's name)",
    )
    p.add_argument(
        "--stop-signal",
        type=parse_signal,
        default=None,
        metavar="SIG",
        help="what stops each entry's tree, once per process (default SIGTERM; a stop_signal setting wins)",
    )
    p.add_argument(
        "--ready-timeout",
        type=parse_seconds,
        default=None,
        metavar="S",
        help="seconds before an entry with nothing proving it ready is reported as running",
    )
    p.add_argument(
        "--exit-with",
        metavar="NAME",
        help="end the run when entry NAME ends, with its status (start services, run tests, stop all)",
    )
    add_strict_option(p)
    p.add_argument("--no-timestamp", action="store_true", help="no time before each line")
    p.add_argument("--no-prefix", action="store_true", help="no time and name before each line (honcho's)")
    p.add_argument(
        "--no-colour", "--no-color", dest="no_colour", action="store_true", help="no colours, even on a terminal"
    )
    # honcho's -q takes the entries whose output to hide; alone (no names after it) it keeps proctree's
    # meaning, the entries' output only. A honcho user's `-q web` must not run only web, quietly.
    p.add_argument(
        "-q",
        "--quiet",
        nargs="?",
        const=True,
        default=False,
        metavar="NAMES",
        help="NAMES (honcho's -q web,worker): hide those entries' output; alone: print the entries' output only, "
        "and why the run failed if it did",
    )
    p.add_argument("--json", action="store_true", help="print each event as one JSON object per line")
    p.add_argument(
        "--stats",
        type=_parse_interval,
        metavar="SECONDS",
        help="every SECONDS, each live entry's summed usage (processes, rss, CPU) as a line, or a "
        '{"kind": "usage"} object under --json (Linux)',
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="run only these entries (and what they depend on)")


def _parse_grace(text):
    """--grace: plain decimal seconds (parse_seconds), at most the supervisor's bound (one day)."""
    import argparse

    seconds = parse_seconds(text)
    if seconds > MAX_STOP_GRACE:
        raise argparse.ArgumentTypeError(f"too many seconds: {shown(text)} (at most {MAX_STOP_GRACE:g}, one day)")
    return seconds


# --stats' bounds: below a tenth of a second the lines would bury the entries' output (and read /proc
# hundreds of times a second); above a day (--grace's bound) the first line would never come.
MIN_STATS_INTERVAL = 0.1


def _parse_interval(text):
    """--stats: plain decimal seconds, from a tenth of a second to a day."""
    import argparse

    seconds = parse_seconds(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {shown(text)}")
    if seconds < MIN_STATS_INTERVAL:
        raise argparse.ArgumentTypeError(f"too short an interval: {shown(text)} (at least {MIN_STATS_INTERVAL:g})")
    if seconds > MAX_STOP_GRACE:
        raise argparse.ArgumentTypeError(f"too many seconds: {shown(text)} (at most {MAX_STOP_GRACE:g}, one day)")
    return seconds


def hidden_output(plan, quiet) -> frozenset[str]:
    """The instances whose output honcho's `-q NAMES` hides (none for a bare -q); CliError for an unknown name."""
    from proctree.procfile import quiet_instances  # see service_specs()

    if not isinstance(quiet, str):
        return frozenset()
    try:
        return quiet_instances(quiet, plan)
    except ValueError as exc:
        raise CliError(str(exc), kind=type(exc).__name__) from None


def service_specs(plan, stop_signal=None) -> list[Any]:
    """One proctree.ServiceSpec per planned instance; CliError naming the entry for a setting it refuses."""
    # Imported here, as proctree's own names load on first use: every command builds this parser.
    from proctree.procfile import service_specs as specs_of

    try:
        return specs_of(plan, stop_signal)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc), kind=type(exc).__name__) from None


def run(args):
    plan = load_plan(args)
    for warning in plan.warnings:  # what honcho would skip silently, said (--strict refuses it)
        sys.stderr.write(f"proctree up: warning: {warning}\n")
    if not plan.services:  # an empty Procfile: honcho runs nothing and exits 0
        return 0
    specs = service_specs(plan, args.stop_signal)
    if getattr(args, "stats", None) is not None:
        _usageview.require_facts("--stats")  # said before anything starts, not as a traceback mid-run
    return asyncio.run(Up(plan, specs, args).main())


class Up:
    """One run: start the plan, print what happens, decide when it ends, stop everything, say so."""

    def __init__(self, plan, specs, args) -> None:
        from proctree.procfile import ExitRule  # see service_specs()

        self.plan = plan
        self.specs = specs
        self.args = args
        self.rule = ExitRule(plan, args.exit_with)
        self.out = Output(
            sys.stdout,
            [s.name for s in plan.services],
            json_mode=args.json,
            timestamps=not args.no_timestamp,
            prefix=not args.no_prefix,
            colour=not args.no_colour,
            quiet=args.quiet is True,
            hidden=hidden_output(plan, args.quiet),
            on_broken=self.on_broken,
            on_drained=self.on_drained,
        )
        self.ending: asyncio.Event | None = None
        self.code = 0
        self.reason = ""
        self.signals = 0
        self.sup: Any = None

    # -- the run --------------------------------------------------------------------

    async def main(self) -> int:
        loop = asyncio.get_running_loop()
        self.ending = asyncio.Event()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        # SIGHUP ignored from the start stays ignored: that is what `nohup proctree up` asks for. An
        # ignored SIGINT is not a wish but a shell's habit (`proctree up &` in a script): a later
        # `kill -INT` is meant, so SIGINT and SIGTERM are always handled, as foreman and honcho do.
        handled = [s for s in ENDING_SIGNALS if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN]
        for sig in handled:
            loop.add_signal_handler(sig, self.on_signal, sig)
        try:
            async with proctree.Supervisor(
                max_services=len(self.specs),
                stop_grace=self.args.grace,
                output_interval=OUTPUT_INTERVAL,
                **self._ready_timeout(),
            ) as sup:
                self.sup = sup
                self.out.start()
                # The listener only queues: printing (which can block or fail) happens off the loop.
                unsubscribe = sup.subscribe(queue.put_nowait)
                printer = asyncio.ensure_future(self.print_events(queue))
                starting = asyncio.ensure_future(sup.start_all(self.specs))
                ended = asyncio.ensure_future(self.ending.wait())
                await asyncio.wait({starting, ended}, return_when=asyncio.FIRST_COMPLETED)
                if starting.done() and starting.exception() is not None:
                    self.end(2, f"could not start: {starting.exception()}")
                stats = None if self.args.stats is None else asyncio.ensure_future(self.report_usage(sup))
                await self.ending.wait()
                if stats is not None:
                    stats.cancel()
                    await asyncio.gather(stats, return_exceptions=True)
                if not starting.done():
                    starting.cancel()
                    await asyncio.gather(starting, return_exceptions=True)
                # An entry's end that stops the run was just said in its own line: not said twice.
                why = "" if self.reason in self.out.said and not self.args.json else f"{self.reason}: "
                self.out.system(
                    f"{why}stopping everything (grace {self.args.grace:g} s)",
                    kind="stopping",
                    after_echo=self.signals > 0,
                    even_if_quiet=self.code != 0 and not self.signals,  # why a run failed is always said
                )
                if not self.args.json:  # honcho's line per instance; --json has each stopped event instead
                    signals = {spec.name: spec.stop_signal for spec in self.specs}
                    for line in _upview.sending_lines(sup.list(), signals):
                        self.out.system(line, kind="sending")
                await sup.stop("all")
                unsubscribe()
                await self.drain(queue, printer)
                # Every service's final word, including those stopped before stop("all")
                # (a start cancelled while they waited for a dependency).
                self.out.closing(sup.list(), self.code)
                await self.out.finish()
        finally:
            await self.out.finish()
            for sig in handled:
                loop.remove_signal_handler(sig)
        return self.code

    def _ready_timeout(self) -> dict[str, Any]:
        return {} if self.args.ready_timeout is None else {"ready_timeout": self.args.ready_timeout}

    async def print_events(self, queue: asyncio.Queue[Any]) -> None:
        while True:
            event = await queue.get()
            if event is None:
                return
            self.show(event)
            self.decide(event)

    async def report_usage(self, sup: Any) -> None:
        """--stats: every interval, each live entry's summed usage; read here only, never by the supervisor."""
        while True:
            await asyncio.sleep(self.args.stats)
            try:
                snaps = sup.list(usage=True)
            except OSError as exc:  # a read the system refused whole: said once, the run goes on
                sys.stderr.write(f"proctree up: --stats: could not read usage, no more tried: {exc}\n")
                return
            for snap in snaps:
                if snap.live:
                    self.out.usage(snap)

    async def drain(self, queue: asyncio.Queue[Any], printer: asyncio.Future[Any]) -> None:
        queue.put_nowait(None)
        await printer

    def show(self, event: Any) -> None:
        try:
            backlog = self.out.event(event)
            if backlog > HIGH_ROWS and self.sup is not None:
                self.sup.pause_output(event.snapshot.id)
        except Exception as exc:  # a line that could not be written must not stop the watching
            sys.stderr.write(f"proctree up: could not show a {event.kind} event of {event.snapshot.name}: {exc!r}\n")

    def on_broken(self) -> None:
        self.end(SIGPIPE_STATUS, "stdout was closed")

    def on_drained(self, sid: str) -> None:
        """A held service's rows are written down to the low mark: read its pipe again."""
        if self.sup is not None:
            self.sup.resume_output(sid)

    # -- when the run ends -----------------------------------------------------------

    def end(self, code: int, reason: str) -> None:
        """Decide the run ends (the first decision stands)."""
        assert self.ending is not None
        if self.ending.is_set():
            return
        self.code, self.reason = code, reason
        self.ending.set()

    def on_signal(self, sig: int) -> None:
        self.signals += 1
        if self.ending is not None and not self.ending.is_set():
            self.end(128 + sig, f"{signal.Signals(sig).name} received")
            return
        # Asked again while stopping (a second Ctrl+C): no more grace. reap_sync SIGKILLs every
        # tree at once, and is idempotent; the stop under way then finds them gone.
        self.out.system(f"{signal.Signals(sig).name} again: ending everything now", kind="kill")
        if self.sup is not None:
            self.sup.reap_sync()

    def decide(self, event: Any) -> None:
        """Hand an entry's end to foreman's exit rule (proctree.procfile.ExitRule); end the run if it says so.

        The ends are handled in the order the events are (not by live_count(), which is already
        ahead), so an entry whose end must stop the run is never passed over.
        """
        if event.kind not in ("exited", "failed") or self.ending is None or self.ending.is_set():
            return
        snap = event.snapshot
        ending = self.rule.on_end(
            snap.name,
            failed=event.kind == "failed",
            status=_upview.exit_status(snap),
            exit_code=snap.exit_code,
            how=_upview.how_it_ended(snap),
        )
        if ending is not None:
            self.end(ending.code, ending.reason)


class Output:
    """Where up's lines go: text through the view, or JSON lines; once stdout breaks, nowhere.

    Lines are queued in order and written by one worker thread, so a slow
    terminal, pipe or file never blocks the event loop (signals, stops and
    other services go on). event() returns how many rows of that service
    are waiting to be written; on_drained(id) says when a service that was
    over HIGH_ROWS is back under LOW_ROWS.
    """

    # Under -q, the only news up still prints (as text; --json prints everything).
    QUIET_NEWS = frozenset({"output", "failed", "crash-loop"})

    def __init__(
        self,
        stream: Any,
        names: Any,
        *,
        json_mode: bool,
        timestamps: bool,
        prefix: bool = True,
        colour: bool = True,
        quiet: bool = False,
        hidden: frozenset[str] = frozenset(),
        on_broken: Any = None,
        on_drained: Any = None,
    ) -> None:
        self.stream = stream
        self.json = json_mode
        self.quiet = quiet and not json_mode
        self.hidden = hidden  # instances whose output honcho's -q NAMES hides (their news still shows)
        self.said: set[str] = set()  # the news lines shown as text (an entry's end is said once, not again)
        self.view = _upview.View(
            names,
            colour=colour and not json_mode and _upview.colour_wanted(stream),
            timestamps=timestamps,
            prefix=prefix,
        )
        self.broken = False
        self.on_broken = on_broken
        self.on_drained = on_drained
        self._outbox: list[tuple[str, str | None, int]] = []  # (text, service id, rows)
        self.backlog: dict[str, int] = {}
        self._held: set[str] = set()
        self._kick: asyncio.Event | None = None
        self._writer: asyncio.Future[None] | None = None
        self._finishing = False

    def start(self) -> None:
        self._kick = asyncio.Event()
        self._writer = asyncio.ensure_future(self._pump())

    def write(self, lines: list[str], sid: str | None = None, rows: int = 0) -> None:
        if self.broken or not lines:
            return
        text = "".join(line + "\n" for line in lines)
        if self._kick is None:  # no loop (not started, or finished): write here
            self._write_now(text)
            return
        self._outbox.append((text, sid, rows))
        if sid is not None:
            self.backlog[sid] = self.backlog.get(sid, 0) + rows
            if self.backlog[sid] > HIGH_ROWS:
                self._held.add(sid)
        self._kick.set()

    def _write_now(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.lost()
            if self.on_broken is not None:
                self.on_broken()

    async def _pump(self) -> None:
        assert self._kick is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._outbox:
                if self._finishing:
                    return
                self._kick.clear()
                await self._kick.wait()
                continue
            batch, self._outbox = self._outbox, []
            text = "".join(t for t, _, _ in batch)
            if not self.broken:
                try:
                    await loop.run_in_executor(None, self._write_blocking, text)
                except BrokenPipeError:
                    self.lost()
                    if self.on_broken is not None:
                        self.on_broken()
                except Exception as exc:  # a line that could not be written must not stop the run
                    sys.stderr.write(f"proctree up: could not write output: {exc!r}\n")
            for _, sid, rows in batch:
                if sid is None:
                    continue
                left = self.backlog[sid] = self.backlog.get(sid, 0) - rows
                if sid in self._held and left <= LOW_ROWS:
                    self._held.discard(sid)
                    if self.on_drained is not None:
                        self.on_drained(sid)

    def _write_blocking(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    async def finish(self) -> None:
        """Write out what is queued, then write directly from now on."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._finishing = True
        assert self._kick is not None
        self._kick.set()
        await writer
        self._kick = None

    def event(self, event: Any) -> int:
        """Queue the lines of one event; the rows of its service now waiting to be written."""
        sid = event.snapshot.id
        if self.quiet and event.kind not in self.QUIET_NEWS:
            return self.backlog.get(sid, 0)
        if event.kind == "output" and event.snapshot.name in self.hidden:
            return self.backlog.get(sid, 0)
        if self.json:
            self.write([_upview.json_line(event.to_dict())], sid, len(event.rows))
        else:
            self.write(self.view.event(event), sid, len(event.rows))
            if event.kind != "output" and not self.broken:
                self.said.add(_upview.news(event) or "")
        return self.backlog.get(sid, 0)

    def system(
        self, text: str, *, kind: str, after_echo: bool = False, even_if_quiet: bool = False, **fields: Any
    ) -> None:
        """One line of up's own; after_echo: a terminal may have echoed ^C, which the line overwrites."""
        if self.quiet and not even_if_quiet:
            return
        if self.json:
            self.write([_upview.json_line({"kind": kind, "at": time.time(), "message": text, **fields})])
        else:
            self.write([("\r" if after_echo and self.view.colour else "") + self.view.system(text)])

    def usage(self, snap: Any) -> None:
        """One entry's --stats report: a usage object with the snapshot (usage filled) or a line of words."""
        if self.json:
            self.write([_upview.json_line({"kind": "usage", "at": time.time(), "service": snap.to_dict()})])
        elif not self.quiet and snap.name not in self.hidden:
            self.write([self.view.system(f"{snap.name}: {_usageview.summary(snap.usage)}")])

    def closing(self, stopped: list[Any], code: int) -> None:
        if self.json:
            incomplete = [s.name for s in stopped if s.kill_incomplete]
            self.system(
                "nothing left running" if not incomplete else "stop incomplete",
                kind="exit",
                code=code,
                stopped=[s.name for s in stopped if s.status == "stopped"],
                incomplete=incomplete,
            )
            return
        if self.quiet and not any(s.kill_incomplete for s in stopped):
            return
        self.quiet = False  # something may be left running: always said
        for line in _upview.closing_lines(stopped):
            self.system(line, kind="closing")

    def lost(self) -> None:
        """stdout's reader went away: drop our output from now on (the interpreter's last flush too)."""
        self.broken = True
        self._outbox.clear()
        discard_output(self.stream)
