"""The reaper's selection on synthetic tables: every invariant, no real process.

Each table is a few lines: pid ppid sid start [state], markers by pid, and
the other evidence kinds built directly. select() sees only what it is given.
"""

import random

import pytest

from proctree._containment.evidence.leftovers import LeftoverCgroup
from proctree._containment.evidence.marker import Marker, parse_marker
from proctree._reaper.rules import CLAUDE_DAEMON, Rule
from proctree._reaper.select import Facts, ReceiptFact, owner_state, select, subtree
from proctree._table.model import Proc

ME = 50


def table(rows):
    """rows: 'pid ppid sid start [state]' -> {pid: Proc} (pgid = sid)."""
    out = {}
    for row in rows:
        f = row.split()
        pid, ppid, sid, start = map(int, f[:4])
        state = f[4] if len(f) > 4 else "S"
        out[pid] = Proc(pid, ppid, sid, sid, 0, state, start, f"p{pid}")
    return out


BASE = ["1 0 1 0", "40 1 40 10", f"{ME} 40 40 20"]  # init, a shell, the reaper


def facts(rows, markers=None, **kw):
    kw.setdefault("me", ME)
    kw.setdefault("ancestors", frozenset({40}))
    return Facts(table(BASE + rows), markers or {}, **kw)


def picked(sel):
    return {o.proc.pid: o.reason for o in sel.orphans}


@pytest.mark.parametrize(
    ("rows", "pid", "start", "gone", "want"),
    [
        (["100 1 100 100"], 100, 100, (), "alive"),
        (["100 1 100 100 Z"], 100, 100, (), "exited"),
        (["100 1 100 300"], 100, 100, (), "reused"),
        (["100 1 100 50"], 100, 100, (), "unknown"),  # an older process at the pid: the evidence is wrong
        ([], 100, 100, (100,), "gone"),
        ([], 100, 100, (), "unknown"),  # absent from the table but not confirmed gone (hidden?)
        ([], 1, 0, (), "invalid"),
        ([], 0, 0, (), "invalid"),
        ([], 2**22 + 1, 0, (2**22 + 1,), "invalid"),
    ],
)
def test_owner_state(rows, pid, start, gone, want):
    assert owner_state(facts(rows, gone=frozenset(gone)), pid, start) == want


def test_marker_with_exited_owner_takes_the_process_and_its_unmarked_descendants():
    f = facts(
        ["100 1 100 100 Z", "200 1 200 150", "201 200 200 160", "202 201 200 170"],
        {200: Marker(100, 100)},
    )
    sel = select(f)
    assert picked(sel) == {200: "owner-exited", 201: "owner-exited", 202: "owner-exited"}
    by = {o.proc.pid: o for o in sel.orphans}
    assert by[200].via == "marker" and by[201].via == "ancestor 200" and by[202].via == "ancestor 200"
    assert by[200].owner == (100, 100)


def test_confirmed_gone_owner_and_reused_owner_pid():
    f = facts(
        ["200 1 200 150", "300 1 300 160", "100 1 100 400"],
        {200: Marker(99, 90), 300: Marker(100, 95)},
        gone=frozenset({99}),
    )
    assert picked(select(f)) == {200: "owner-exited", 300: "owner-pid-reused"}


def test_an_owner_not_confirmed_gone_is_unknown_and_proves_nothing():
    f = facts(["200 1 200 150"], {200: Marker(99, 90)})
    sel = select(f)
    assert picked(sel) == {}
    assert [s.pid for s in sel.skipped] == [200]


def test_a_live_owner_protects_its_subtree_and_every_process_with_its_marker():
    f = facts(
        ["100 1 100 100", "110 100 100 110", "111 110 100 120", "200 1 200 150", "201 200 200 160"],
        # 111 and 201 carry the live owner's marker; 201 was double-forked away.
        {111: Marker(100, 100), 201: Marker(100, 100)},
    )
    sel = select(f)
    assert picked(sel) == {}
    assert {100, 110, 111, 201} <= sel.protected


def test_a_live_owners_subprocess_quoting_a_rule_is_not_a_seed():
    f = facts(
        ["100 1 100 100", "110 100 100 110"],
        {110: Marker(100, 100)},
        rule_hits={110: ("claude-daemon", 999)},
        gone=frozenset({999}),
    )
    assert picked(select(f)) == {}


def test_never_init_the_reaper_or_its_ancestors():
    f = facts(
        ["200 1 200 150"],
        {1: Marker(99, 0), 40: Marker(99, 5), ME: Marker(99, 5), 200: Marker(99, 90)},
        gone=frozenset({99}),
    )
    assert picked(select(f)) == {200: "owner-exited"}


def test_a_marker_older_than_its_owner_is_not_proof():
    f = facts(["200 1 200 50"], {200: Marker(99, 90)}, gone=frozenset({99}))
    sel = select(f)
    assert picked(sel) == {} and "invalid owner" in sel.skipped[0].reason


@pytest.mark.parametrize("why", ["denied", "unreadable", "too-long", "malformed"])
def test_an_unreadable_marker_is_never_proof_and_stops_the_descent(why):
    f = facts(
        ["200 1 200 150", "201 200 200 160", "202 201 200 170", "300 1 300 150"],
        {200: Marker(99, 90), 201: why, 300: why},
        gone=frozenset({99}),
    )
    sel = select(f)
    assert picked(sel) == {200: "owner-exited"}
    assert 201 in {s.pid for s in sel.skipped}


def test_a_descendant_with_its_own_live_owner_is_protected_with_its_subtree():
    f = facts(
        ["100 1 100 100", "200 1 200 150", "201 200 200 160", "202 201 200 170"],
        {200: Marker(99, 90), 201: Marker(100, 100)},
        gone=frozenset({99}),
    )
    assert picked(select(f)) == {200: "owner-exited"}


def test_ppid_cycles_terminate():
    rows = ["200 201 200 150", "201 202 200 150", "202 200 200 150"]
    f = facts(rows, {200: Marker(99, 90)}, gone=frozenset({99}))
    assert set(picked(select(f))) == {200, 201, 202}
    assert sorted(subtree({1: [2], 2: [1]}, [1])) == [1, 2]


def test_leftover_cgroup_of_a_gone_owner():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (200, 201))
    f = facts(["200 1 200 150", "201 1 201 150"], cgroups=[cg], gone=frozenset({99}))
    sel = select(f)
    assert picked(sel) == {200: "cgroup-owner-gone", 201: "cgroup-owner-gone"}
    assert sel.whole_cgroups == [cg]


def test_a_scoped_sweep_ends_whole_only_cgroups_it_chose_from():
    # An empty dead cgroup, and one whose member started after the snapshot: neither is in the scope.
    empty = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, ())
    unseen = LeftoverCgroup("/cg/proctree-98-90/tree-1-abc", "/cg/proctree-98-90", (98, 90), None, (300,))
    mine = LeftoverCgroup("/cg/proctree-97-90/tree-1-abc", "/cg/proctree-97-90", (97, 90), None, (200,))
    f = facts(["200 1 200 150"], cgroups=[empty, unseen, mine], gone=frozenset({97, 98, 99}))
    assert select(f, within={200}).whole_cgroups == [mine]
    assert select(f, within={201}).whole_cgroups == []
    assert select(f).whole_cgroups == [empty, unseen, mine]  # unscoped: unchanged


def test_leftover_cgroup_of_a_live_owner_protects_its_members():
    cg = LeftoverCgroup("/cg/proctree-100-100/tree-1-abc", "/cg/proctree-100-100", (100, 100), None, (200,))
    f = facts(["100 1 100 100", "200 1 200 150"], {200: Marker(99, 90)}, cgroups=[cg], gone=frozenset({99}))
    assert picked(select(f)) == {}


def test_a_dead_cgroup_holding_a_protected_process_is_not_ended_whole():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (200, 201))
    f = facts(
        ["100 1 100 100", "200 1 200 150", "201 1 201 150"], {201: Marker(100, 100)}, cgroups=[cg], gone=frozenset({99})
    )
    sel = select(f)
    assert picked(sel) == {200: "cgroup-owner-gone"}
    assert sel.whole_cgroups == [] and sel.warnings


def _receipt(**kw):
    base = dict(path="/r/1.json", owner=(99, 90), keeper=(98, 95), sid=98, pgid=97, tag=None, command=97, tree="a" * 32)
    base.update(kw)
    return ReceiptFact(**base)


def test_receipt_leads_to_its_session_and_group_when_owner_and_keeper_are_gone():
    rows = ["300 1 98 100", "301 1 98 150", "302 1 97 160", "303 1 98 90"]
    t = table(BASE + rows)
    t[302] = t[302]._replace(sid=302, pgid=97)
    f = Facts(t, receipts=[_receipt()], gone=frozenset({99, 98}), me=ME, ancestors=frozenset({40}))
    sel = select(f)
    # 303 started before the keeper: a reused session id is never proof.
    assert picked(sel) == {300: "receipt-owner-gone", 301: "receipt-owner-gone", 302: "receipt-owner-gone"}
    assert sel.receipt_orphans["/r/1.json"] == {300, 301, 302}


def test_receipt_with_a_live_keeper_or_owner_is_not_proof():
    rows = ["98 1 98 95", "300 1 98 100"]
    assert picked(select(facts(rows, receipts=[_receipt()], gone=frozenset({99})))) == {}
    rows = ["99 1 99 90", "300 1 98 100"]
    assert picked(select(facts(rows, receipts=[_receipt()], gone=frozenset({98})))) == {}


def test_receipt_session_id_taken_by_a_later_leader_bounds_what_it_proves():
    # pid 98 now leads a new session 98 (started at 200); only processes older than it belong to the old one.
    rows = ["98 1 98 200", "300 1 98 100", "301 98 98 210"]
    f = facts(rows, receipts=[_receipt(pgid=0)], gone=frozenset({99}))
    assert picked(select(f)) == {300: "receipt-owner-gone"}


def test_receipt_ids_that_are_not_the_keepers_session_or_the_commands_group_prove_nothing():
    # A keeper that could not setsid recorded its owner's session: that session is everybody's.
    rows = ["300 1 98 100", "302 1 302 160"]
    t = table(BASE + rows)
    t[302] = t[302]._replace(pgid=97)
    f = Facts(t, receipts=[_receipt(sid=40, command=None)], gone=frozenset({99, 98}), me=ME, ancestors=frozenset({40}))
    assert picked(select(f)) == {}


def test_receipt_members_whose_environment_is_readable_must_carry_the_trees_id():
    rows = ["300 1 98 100", "301 1 98 110", "302 1 98 120", "303 1 98 130", "304 1 98 140", "305 1 98 150"]
    trees = {
        300: b"a" * 32,
        301: b"b" * 32,
        302: "absent",
        303: "denied",
        304: b"c" * 32 + b":" + b"a" * 32,  # a tree spawned inside the receipt's: its chain names it
        305: b"A" * 32,  # not a tree id at all
    }
    f = facts(rows, receipts=[_receipt()], gone=frozenset({99, 98}), trees=trees)
    # 301 carries another tree's id, 302 none (a reused session id) and 305 garbage; 303 is not ours
    # to read (another user's: not this tree, whose members run as the receipt's writer).
    assert set(picked(select(f))) == {300, 304}


@pytest.mark.parametrize("why", ["too-long", "unreadable"])
def test_a_receipt_member_whose_tree_id_cannot_be_read_whole_is_unknown(why):
    rows = ["300 1 98 100", "301 1 98 110"]
    f = facts(rows, receipts=[_receipt()], gone=frozenset({99, 98}), trees={300: b"a" * 32, 301: why})
    sel = select(f)
    assert set(picked(sel)) == {300}
    assert any(k.pid == 301 and why in k.reason for k in sel.skipped)
    assert sel.stale_receipts == []


def test_the_reapers_own_subtree_is_protected():
    rows = [f"60 {ME} 40 100", "61 60 40 110"]
    f = facts(rows, {60: Marker(99, 90), 61: Marker(99, 90)}, gone=frozenset({99}))
    sel = select(f)
    assert picked(sel) == {} and {ME, 60, 61} <= sel.protected


def test_a_pid_above_this_systems_pid_max_is_no_owner():
    f = facts(["200 1 200 150"], {200: Marker(40000, 90)}, gone=frozenset({40000}), pid_max=32768)
    assert picked(select(f)) == {}
    assert owner_state(f, 40000, 90) == "invalid"


def test_stale_receipt_is_listed_for_removal():
    sel = select(facts([], receipts=[_receipt()], gone=frozenset({99, 98})))
    assert sel.stale_receipts == ["/r/1.json"]


def test_rule_spawner_gone_reused_or_alive():
    rows = ["200 1 200 150", "201 200 200 160", "300 1 300 150", "400 1 400 150", "77 1 77 500"]
    hits = {200: ("claude-daemon", 99), 300: ("claude-daemon", 77), 400: ("claude-daemon", 40)}
    sel = select(facts(rows, rule_hits=hits, gone=frozenset({99})))
    # 200: spawner gone (its child comes along); 300: pid 77 now holds a later process; 400: spawner alive.
    assert picked(sel) == {200: "claude-daemon", 201: "claude-daemon", 300: "claude-daemon"}


def test_tag_selects_one_tags_trees():
    f = facts(
        ["200 1 200 150", "300 1 300 150"], {200: Marker(99, 90, "a"), 300: Marker(99, 90, "b")}, gone=frozenset({99})
    )
    assert set(picked(select(f, tag="a"))) == {200}
    assert set(picked(select(f))) == {200, 300}


def test_within_restricts_candidates_not_evidence():
    f = facts(["200 1 200 150", "201 200 200 160"], {200: Marker(99, 90)}, gone=frozenset({99}))
    assert set(picked(select(f, within={201}))) == {201}
    assert picked(select(f, within=set())) == {}


def test_zombie_orphans_are_not_candidates():
    f = facts(["200 1 200 150 Z"], {200: Marker(99, 90)}, gone=frozenset({99}))
    assert picked(select(f)) == {}


def test_each_evidence_kind_combined_gives_one_orphan_per_process():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (200,))
    f = facts(
        ["200 98 98 150", "98 1 98 95 Z"],
        {200: Marker(99, 90)},
        cgroups=[cg],
        receipts=[_receipt()],
        rule_hits={200: ("claude-daemon", 99)},
        gone=frozenset({99}),
    )
    sel = select(f)
    assert [o.reason for o in sel.orphans] == ["cgroup-owner-gone"]


def test_random_tables_never_select_a_protected_process():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 40)
        pids = rng.sample(range(60, 400), n)
        rows = [
            f"{p} {rng.choice([1, *pids])} {rng.choice(pids)} {rng.randint(0, 500)} {rng.choice('SSSZ')}" for p in pids
        ]
        t = table(BASE + rows)
        owners = rng.sample(pids, min(3, n))
        markers = {}
        for p in pids:
            r = rng.random()
            if r < 0.4:
                o = rng.choice(owners + [999])
                markers[p] = Marker(o, rng.choice([t[o].start_time if o in t else 5, rng.randint(0, 500)]))
            elif r < 0.5:
                markers[p] = rng.choice(["denied", "malformed"])
        f = Facts(t, markers, gone=frozenset({999}), me=ME, ancestors=frozenset({40}))
        sel = select(f)
        got = {o.proc.pid for o in sel.orphans}
        assert not got & {0, 1, ME, 40}
        for o in owners:
            if o in t and not t[o].is_zombie:
                live_marked = {
                    p
                    for p, m in markers.items()
                    if isinstance(m, Marker) and m.pid == o and m.start_time == t[o].start_time
                }
                if live_marked:
                    assert o not in got and not live_marked & got


@pytest.mark.parametrize("seed", range(5))
def test_parse_marker_fuzz(seed):
    rng = random.Random(seed)
    good = b"1234:5678:tag"
    for _ in range(2000):
        b = bytearray(good)
        for _ in range(rng.randint(0, 4)):
            op = rng.random()
            if op < 0.4 and b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op < 0.7:
                b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
            elif b:
                del b[rng.randrange(len(b))]
        m = parse_marker(bytes(b))
        assert m is None or (isinstance(m, Marker) and m.pid > 0)
        parse_marker(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))


def test_rules_match_on_the_executable_only():
    blob = '{"label":"claude","pid":4242}'
    assert CLAUDE_DAEMON.match(["/usr/bin/claude", "daemon", "run", "--spawned-by", blob]) == 4242
    assert CLAUDE_DAEMON.match(["claude.exe", "daemon", "run", f"--spawned-by={blob}"]) == 4242
    for argv in (
        ["grep", "claude daemon run --spawned-by", blob],
        ["less", "/usr/bin/claude", "daemon", "run", "--spawned-by", blob],
        ["claude", "daemon", "stop", "--spawned-by", blob],
        ["claude", "daemon", "run", "--spawned-by", '{"pid": 1}'],
        ["claude", "daemon", "run", "--spawned-by", '{"pid": true}'],
        ["claude", "daemon", "run", "--spawned-by", '{"pid": "12"}'],
        ["claude", "daemon", "run", "--spawned-by", "[1,2]"],
        ["claude", "daemon", "run", "--spawned-by", "{" * 5000],
        ["claude", "daemon", "run", "--spawned-by"],
        [],
    ):
        assert CLAUDE_DAEMON.match(argv) is None, argv


def test_a_rule_is_one_table_entry_and_validated():
    r = Rule("my-helper", ("helperd",), lambda argv: int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else None)
    assert r.match(["/opt/helperd", "77"]) == 77 and r.match(["/opt/helperd", "x"]) is None
    assert Rule("boom", ("b",), lambda argv: 1 // 0).match(["b"]) is None
    for bad in (
        dict(name="a b", executables=("x",)),
        dict(name="a", executables="x"),
        dict(name="a", executables=("a/b",)),
    ):
        with pytest.raises(ValueError):
            Rule(spawner=lambda a: None, **bad)
    assert r.wants_name("helperd") and CLAUDE_DAEMON.wants_name("claude") and not CLAUDE_DAEMON.wants_name("node")


# ---------------------------------------------------------------------------
# Credentials: evidence never lends privilege (the kernel's kill rule on uids).

U = 4242  # an unprivileged uid
R = (0, 0, 0)  # root, all three
USER = (U, U, U)
SETUID_ROOT = (U, 0, 0)  # a setuid-root program the user ran: the user may signal it


@pytest.mark.parametrize(
    ("sender", "target", "want"),
    [
        (R, USER, True),
        (USER, USER, True),
        (USER, R, False),
        (USER, SETUID_ROOT, True),  # its real uid is the user's
        (USER, (0, 0, U), True),  # its saved uid is the user's
        (USER, (0, U, 0), False),  # only its effective uid is: the kernel says no
        ((U, 0, 0), R, True),  # an effective root sender may
        ((0, U, U), R, True),  # a real-root sender matches the target's real uid
        ((5, 5, 5), USER, False),
    ],
)
def test_can_signal_is_the_kernels_rule(sender, target, want):
    from proctree._reaper.select import can_signal

    assert can_signal(sender, target) is want


def _cred_facts(rows, markers, creds, **kw):
    return facts(rows, markers, gone=frozenset({99}), creds=creds, **kw)


def test_a_marker_never_leads_below_a_change_to_root():
    # 200 (the user's, forged marker) -> 201 (setuid root, marker kept) -> 202 (root, dropped the marker)
    rows = ["200 1 200 150", "201 200 200 160", "202 201 200 170"]
    markers = {200: Marker(99, 90), 201: Marker(99, 90)}
    sel = select(_cred_facts(rows, markers, {200: USER, 201: R, 202: R}))
    assert set(picked(sel)) == {200}
    reasons = {k.pid: k.reason for k in sel.skipped}
    assert "could not signal" in reasons[201] and "parent 200" in reasons[201]
    assert 202 not in picked(sel)


def test_a_setuid_program_the_user_could_signal_is_still_taken():
    rows = ["200 1 200 150", "201 200 200 160"]
    markers = {200: Marker(99, 90), 201: Marker(99, 90)}
    sel = select(_cred_facts(rows, markers, {200: USER, 201: SETUID_ROOT}))
    assert set(picked(sel)) == {200, 201}


def test_a_markers_recorded_owner_uid_bounds_it():
    rows = ["200 1 200 150"]
    claim_user = Marker(99, 90, None, 1, 2, U)
    sel = select(_cred_facts(rows, {200: claim_user}, {200: R}))
    assert picked(sel) == {}
    assert "the marker's owner" in {k.pid: k.reason for k in sel.skipped}[200]
    # Root's own marker on root's process: taken.
    assert set(picked(select(_cred_facts(rows, {200: Marker(99, 90, None, 1, 2, 0)}, {200: R})))) == {200}


def test_the_descent_stops_at_a_change_of_credentials_either_way():
    # root's orphan 200; 201 dropped to the user (a worker), 202 below it; 203 unreadable.
    rows = ["200 1 200 150", "201 200 200 160", "202 201 200 170", "203 200 200 180"]
    sel = select(_cred_facts(rows, {200: Marker(99, 90)}, {200: R, 201: USER, 202: USER}))
    assert set(picked(sel)) == {200}
    reasons = {k.pid: k.reason for k in sel.skipped}
    assert "other (or unreadable) credentials" in reasons[201]
    assert "other (or unreadable) credentials" in reasons[203]


def test_a_rule_helper_never_leads_below_a_change_of_credentials():
    rows = ["200 1 200 150", "201 200 200 160"]
    f = facts(rows, rule_hits={200: ("claude-daemon", 99)}, gone=frozenset({99}), creds={200: USER, 201: R})
    sel = select(f)
    assert set(picked(sel)) == {200}


def test_unreadable_credentials_are_never_a_candidate():
    rows = ["200 1 200 150"]
    sel = select(_cred_facts(rows, {200: Marker(99, 90)}, {}))
    assert picked(sel) == {}
    assert "cannot be read" in {k.pid: k.reason for k in sel.skipped}[200]


def test_a_leftover_cgroup_made_by_a_user_never_leads_to_root():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (200, 201), uid=U)
    rows = ["200 1 200 150", "201 1 201 150"]
    sel = select(facts(rows, cgroups=[cg], gone=frozenset({99}), creds={200: USER, 201: R}))
    assert set(picked(sel)) == {200}
    assert sel.whole_cgroups == []  # never ended whole: it holds what is not taken


def test_a_cgroup_listing_members_as_0_is_never_empty_nor_taken():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (), hidden=3)
    sel = select(facts([], cgroups=[cg], gone=frozenset({99})))
    assert sel.whole_cgroups == [] and sel.dead_cgroups == []
    assert any("not visible here" in k.reason for k in sel.skipped)


def test_a_receipt_member_of_another_uid_is_not_the_trees():
    rows = ["300 1 98 100", "301 1 98 110"]
    f = facts(rows, receipts=[_receipt(uid=U)], gone=frozenset({99, 98}), creds={300: USER, 301: R})
    assert set(picked(select(f))) == {300}


def test_a_dead_cgroup_another_user_made_is_never_ended_whole_by_a_root_reaper():
    cg = LeftoverCgroup("/cg/proctree-99-90/tree-1-abc", "/cg/proctree-99-90", (99, 90), None, (200,), uid=U)
    rows = ["200 1 200 150"]
    as_root = select(facts(rows, cgroups=[cg], gone=frozenset({99}), creds={200: USER}, reaper_uid=0))
    assert set(picked(as_root)) == {200} and as_root.whole_cgroups == []  # one by one, by identity
    as_user = select(facts(rows, cgroups=[cg], gone=frozenset({99}), creds={200: USER}, reaper_uid=U))
    assert as_user.whole_cgroups == [cg]


@pytest.mark.parametrize("parent_marker", [None, Marker(98, 80)], ids=["unmarked-parent", "another-owner"])
def test_a_setuid_root_child_with_a_marker_of_its_own_is_never_taken(parent_marker):
    # The user's live shell 200 runs a setuid-root program 201 and gives it a marker naming a dead owner
    # (claiming uid 0): a line of its own, but its parent could not have signalled it.
    rows = ["200 1 200 150", "201 200 200 160"]
    markers = {201: Marker(99, 90, None, 1, 2, 0)}
    if parent_marker is not None:
        markers[200] = parent_marker
    sel = select(facts(rows, markers, gone=frozenset({99, 98}), creds={200: USER, 201: R}))
    assert 201 not in picked(sel)
    assert "could not signal" in {k.pid: k.reason for k in sel.skipped}[201]


def test_a_deep_line_of_one_owners_markers_costs_its_length_once():
    import time as _time

    depth = 3000
    rows = ["1000 1 1000 150"] + [f"{1000 + i} {999 + i} 1000 150" for i in range(1, depth)]
    markers = {1000 + i: Marker(99, 90) for i in range(depth)}
    f = facts(rows, markers, gone=frozenset({99}))
    t = _time.perf_counter()
    sel = select(f)
    assert len(sel.orphans) == depth
    assert _time.perf_counter() - t < 5  # quadratic was minutes at this depth
