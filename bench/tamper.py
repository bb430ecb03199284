"""A derived-tier tamper campaign (a benchmark, not a test): every kind of file under
``knowledge/`` and ``state/`` is deleted, edited (also keeping its size and mtime), or replaced
by garbage, one at a time, in a copy of a projected workspace. Then ``status``, ``verify
--tiers`` and ``project`` run, and the reading commands (``hot``, ``query``, ``library``,
``sql``) are asked.

Each case is counted as repaired (after ``project`` every tier equals a rebuild from the log:
files byte for byte, cold rows value for value), or reported (``status`` or ``verify --tiers``
named the damage, or ``project`` exited non-zero saying what is wrong), or silent (neither:
a failure). Also failures: a traceback or an exit code other than 0/1/2 from any command, any
change to a log, and a reading command serving the injected text.

    python bench/tamper.py [--ways delete,edit,stealth,garbage]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, use_extractive_summarizer

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
CLI = [sys.executable, "-m", "airsspec"]
INJECTED = "OMEGA INJECTED"
READS = (
    ["hot", "alpha"],
    ["query", "parser stable", "--json"],
    ["library", "--show", "1"],
    ["sql", "select count(*) from events"],
)


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=root, env=ENV, capture_output=True, text=True)


def build(root: Path) -> None:
    """A workspace with two sessions, a compaction, a source document, every tier projected."""
    run(root, "init")
    config = root / "airsspec.toml"
    use_extractive_summarizer(config)
    for session in ("alpha", "beta"):
        lines = "".join(
            json.dumps({"type": "user", "content": f"{session} decision {i}: parser.py"}) + "\n"
            for i in range(30)
        )
        subprocess.run(
            [*CLI, "append", session, "-"],
            cwd=root,
            env=ENV,
            input=lines,
            text=True,
            check=True,
            capture_output=True,
        )
    (root / ".airsspec" / "sources").mkdir(exist_ok=True)
    (root / ".airsspec" / "sources" / "design.md").write_text("# Design\nThe parser is stable.\n")
    assert run(root, "compact", "--force", "alpha").returncode == 0
    assert run(root, "project").returncode == 0


def kind_of(rel: str) -> str:
    """A file's kind: its path with session names, hashes and numbers generalised."""
    rel = re.sub(r"\b(alpha|beta)\b", "SESSION", rel)
    rel = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27,}", "UUID", rel)
    rel = re.sub(r"[0-9a-f]{16,}", "HASH", rel)
    return re.sub(r"\d+", "N", rel)


def targets(ws: Path) -> dict[str, str]:
    """One file per kind under knowledge/ and state/ (locks hold nothing and are skipped)."""
    found: dict[str, str] = {}
    for top in ("knowledge", "state"):
        for path in sorted((ws / top).rglob("*")):
            rel = path.relative_to(ws).as_posix()
            if path.is_file() and not rel.endswith(".lock"):
                found.setdefault(kind_of(rel), rel)
    return found


def damage(path: Path, how: str) -> None:
    """Delete, edit, edit keeping size and mtime ("stealth"), or overwrite with garbage."""
    if how == "delete":
        path.unlink()
        return
    if how == "garbage":
        path.write_bytes(b"garbage\n")
        return
    st, data = path.stat(), path.read_bytes()
    try:
        text: str | None = data.decode("utf-8") if b"\0" not in data else None
    except UnicodeDecodeError:
        text = None
    # "alpha decision" and INJECTED have the same length, so the stealth edit keeps the size
    if text is not None and "alpha decision" in text:
        path.write_text(text.replace("alpha decision", INJECTED, 1))
    else:  # binary, or no text to change: flip bytes in the middle
        middle = len(data) // 2
        path.write_bytes(
            data[:middle]
            + bytes(b ^ 0xFF for b in data[middle : middle + 16])
            + data[middle + 16 :]
        )
    if how == "stealth":
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def tiers_of(ws: Path) -> dict[str, object]:
    """What a rebuild must reproduce: every deterministic output file, and the cold rows."""
    out: dict[str, object] = {}
    for folder in ("knowledge/library", "state/hot", "state/warm", "state/tokens"):
        for path in sorted((ws / folder).glob("*")) if (ws / folder).is_dir() else ():
            out[f"{folder}/{path.name}"] = path.read_bytes()
    code = (
        "import json,sys; sys.path.insert(0, sys.argv[2]);"
        "from airsspec.workspace import Workspace;"
        "ws = Workspace.open(config=sys.argv[1]);"
        "t = ws.recall().store.open();"
        "rows = [] if t is None else "
        "t.to_arrow().drop_columns(['vector']).sort_by('unit_id').to_pylist();"
        "print(json.dumps(rows, default=str))"
    )
    got = subprocess.run(
        [sys.executable, "-c", code, str(ws.parent / "airsspec.toml"), str(REPO)],
        cwd=ws.parent,
        env=ENV,
        capture_output=True,
        text=True,
    )
    out["cold rows"] = got.stdout if got.returncode == 0 else f"unreadable: {got.stderr[-200:]}"
    return out


def _rows_diff(expected: dict, now: dict) -> str:
    try:
        a, b = json.loads(expected["cold rows"]), json.loads(now["cold rows"])
    except ValueError:
        return "cold rows unreadable"
    ua, ub = {r["unit_id"]: r for r in a}, {r["unit_id"]: r for r in b}
    changed = [u for u in ua.keys() & ub.keys() if ua[u] != ub[u]]
    return (
        f"{len(a)} rows expected, {len(b)} now; missing {sorted(ua.keys() - ub.keys())[:5]}, "
        f"extra {sorted(ub.keys() - ua.keys())[:5]}, changed {changed[:3]}"
    )


def _json(text: str) -> dict:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def logs(ws: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ws / "contexts").rglob("*")) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ways", default="delete,edit,stealth,garbage")
    parser.add_argument("--only", default="", help="only file kinds containing this")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="airsspec-bench-tamper-"))
    pristine = base / "pristine"
    pristine.mkdir()
    build(pristine)
    expected = tiers_of(pristine / ".airsspec")
    kinds = targets(pristine / ".airsspec")
    rows, outcomes, problems = [], Counter[str](), []
    kinds = {k: v for k, v in kinds.items() if args.only in k}
    for kind, rel in kinds.items():
        cells = [kind]
        for how in args.ways.split(","):
            case = base / "case"
            shutil.rmtree(case, ignore_errors=True)
            shutil.copytree(pristine, case, symlinks=True)
            ws = case / ".airsspec"
            before = logs(ws)
            damage(ws / rel, how)
            status = run(case, "status", "--json")
            checked = run(case, "verify", "--tiers")
            projected = run(case, "project")
            reads = [run(case, *r) for r in READS]
            every = [status, checked, projected, *reads]
            bad = [
                f"{kind} {how}: `{' '.join(p.args[3:])}` exit {p.returncode}: "
                + (p.stderr.strip().splitlines() or [""])[-1][:200]
                for p in every
                if p.returncode not in (0, 1, 2) or "Traceback" in p.stderr
            ]
            if logs(ws) != before:
                bad.append(f"{kind} {how}: a log changed")
            if any(INJECTED in r.stdout for r in reads):
                bad.append(f"{kind} {how}: a read served the injected text")
            reported = (
                checked.returncode == 1
                or bool(_json(status.stdout).get("degraded"))
                or projected.returncode != 0
            )
            now = tiers_of(ws)
            repaired = now == expected
            if not repaired:
                differ = [k for k in expected.keys() | now.keys() if now.get(k) != expected.get(k)]
                print(f"{kind} {how}: not as rebuilt: {differ}: {_rows_diff(expected, now)}")
            verdict = "repaired" if repaired else "reported" if reported else "SILENT"
            if verdict == "SILENT":
                bad.append(f"{kind} {how}: neither repaired nor reported")
            outcomes[verdict] += 1
            problems += bad
            cells.append(verdict + (" !" if bad else ""))
        rows.append(cells)
    print_table(
        f"Tamper campaign: {len(kinds)} kinds of derived file x {len(args.ways.split(','))} "
        "damages (repaired: every tier equals a rebuild after `project`)",
        ["file kind", *args.ways.split(",")],
        rows,
    )
    print_table(
        "Totals",
        ["cases", "repaired", "reported", "silent", "tracebacks/bad exits/log changes/served"],
        [
            [
                sum(outcomes.values()),
                outcomes["repaired"],
                outcomes["reported"],
                outcomes["SILENT"],
                len([p for p in problems if "neither" not in p]),
            ]
        ],
    )
    for problem in problems:
        print("  -", problem)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
