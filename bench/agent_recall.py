"""Retrieval on a long agent session, with questions nobody here wrote: the second check, so
that LoCoMo's chats are not the only data the ranking is chosen on.

The session is the long Claude Code transcript of the dev data that Claude Code compacted
itself. The records before its compaction boundary are imported; the summary Claude wrote of
them at the boundary supplies the questions. Each bullet of that summary that names
identifiers (backticked code, file names, issue ids) becomes one question: the bullet with its
identifiers taken out (so the question describes, in words, what happened), and its evidence
is every record before the boundary whose text holds all of those identifiers (bullets whose
identifiers occur in no record, or in more than ``MAX_EVIDENCE``, are left out: they point at
nothing or at everything). Recall@10 is the share of a question's evidence records among the
records of the top 10 hits; "found" is the share of questions with at least one. The same
questions are asked of plain BM25 over the same units (its chunks of one record counted as
that record) in the same run. A bias to keep in mind: evidence is found by exact identifiers,
which favours lexical matching, and the masked question holds none of them.

    python bench/agent_recall.py
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table
from bench.locomo_data import DATA

SESSION = DATA.parents[1] / "claude-code" / "compact" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
MAX_EVIDENCE = 10
_IDENTIFIER = re.compile(
    r"`([^`]{3,})`"  # backticked code
    r"|\b([\w/.-]+\.(?:exs?|js|json|md|toml|heex|css))\b"  # file names
    r"|\b(spotter-gqc(?:\.\d+)?|gqc\.\d+)\b"  # issue ids
)


def weights(*values: float) -> dict[str, str]:
    """(semantic, focus, lexical, recency, anchor, speaker) as ``[cold]`` overrides."""
    names = ("semantic", "focus", "lexical", "recency", "anchor", "speaker")
    return {f"AIRSSPEC_COLD_WEIGHT_{n.upper()}": str(v) for n, v in zip(names, values, strict=True)}


SETTINGS = {
    "query_memory, defaults (query --batch)": {},
    "  no speaker part: weights (0.25, 0.5, 0.25, 0, 0.1, 0)": weights(0.25, 0.5, 0.25, 0, 0.1, 0),
    "  no focus: weights (0.5, 0, 0.25, 0, 0.1, 0.15)": weights(0.5, 0, 0.25, 0, 0.1, 0.15),
    "  weights (0.25, 0.5, 0.5, 0, 0.1, 0.15)": weights(0.25, 0.5, 0.5, 0, 0.1, 0.15),
    "  no relevance floor": {"AIRSSPEC_COLD_MIN_SCORE": "0"},
}
"""The defaults, and what else was measured (``[cold]`` keys as environment overrides; weights
are (semantic, focus, lexical, recency, anchor, speaker))."""


def boundary(rows: list[dict]) -> int:
    """The index of the compaction boundary record."""
    return next(i for i, r in enumerate(rows) if r.get("subtype") == "compact_boundary")


def summary_text(rows: list[dict], at: int) -> str:
    content = rows[at + 1]["message"]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content)


def questions(summary: str, texts: dict[int, str]) -> list[tuple[str, tuple[int, ...]]]:
    """(masked bullet, evidence record seqs) for each usable bullet of ``summary``."""
    found = []
    for line in summary.splitlines():
        bullet = line.strip()
        if not bullet.startswith("- "):
            continue
        names = {next(g for g in m.groups() if g) for m in _IDENTIFIER.finditer(bullet)}
        if not names:
            continue
        masked = _IDENTIFIER.sub(" ", bullet[2:])
        masked = " ".join(re.sub(r"[*()\[\]{}]", " ", masked).split())
        if len(re.findall(r"[A-Za-z]{3,}", masked)) < 3:
            continue
        evidence = tuple(seq for seq, text in texts.items() if all(n in text for n in names))
        if 0 < len(evidence) <= MAX_EVIDENCE:
            found.append((masked, evidence))
    return list(dict.fromkeys(found))


def main() -> None:
    from bench.cold import cli
    from projections.bm25 import BM25

    if not SESSION.exists():
        sys.exit(f"{SESSION} is absent: this measurement needs ../shared/data")
    raw = SESSION.read_bytes().splitlines()
    rows = [json.loads(line) for line in raw]
    at = boundary(rows)
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        root = Path(tmp)
        cli("init", str(root), cwd=root)
        source = root / SESSION.name
        source.write_bytes(b"\n".join(raw[:at]) + b"\n")  # the records before the boundary
        cli("import", "claude-code", str(source), cwd=root)
        cli("project", "--tier", "cold", cwd=root)
        from airsspec.workspace import Workspace

        with Workspace.open(config=root / "airsspec.toml") as ws:
            table = ws.recall().store.open()
            units = table.to_arrow().select(["unit_id", "kind", "record_seq", "text"]).to_pylist()
        units = [u for u in units if u["kind"] == "message"]
        texts: dict[int, str] = {}
        for unit in units:
            texts[unit["record_seq"]] = texts.get(unit["record_seq"], "") + unit["text"]
        asked = questions(summary_text(rows, at), texts)
        batch = "".join(json.dumps({"query": q, "k": 10}) + "\n" for q, _ in asked).encode()
        methods = {}
        for label, weights in SETTINGS.items():
            out = cli("query", "--batch", "-", "--stale", cwd=root, stdin=batch, env=weights)
            methods[label] = [
                [h["record_seq"] for h in json.loads(line)["hits"]] for line in out.splitlines()
            ]
        bm25 = BM25([u["text"] for u in units])
        lexical = []
        for query, _ in asked:
            seqs: list[int] = []
            for index, _ in bm25.top(query, 200):
                if units[index]["record_seq"] not in seqs:
                    seqs.append(units[index]["record_seq"])
            lexical.append(seqs)
    methods["BM25, same units"] = lexical
    table_rows = []
    for name, ranked in methods.items():
        recall, found, distinct = [], [], []
        for (_, evidence), seqs in zip(asked, ranked, strict=True):
            top = set(seqs[:10])
            distinct.append(len(top))
            recall.append(sum(e in top for e in evidence) / len(evidence))
            found.append(bool(top & set(evidence)))
        table_rows.append([name, len(asked), *map(statistics.fmean, (recall, found, distinct))])
    ratio = [table_rows[0][i] / table_rows[-1][i] for i in (2, 3, 4)]
    table_rows.append(["defaults / BM25", "", *ratio])
    print_table(
        f"Long agent session ({at} records before compaction): questions from its own compaction"
        " summary, identifiers masked",
        ["method", "questions", "recall@10", "found@10", "records in top 10"],
        table_rows,
    )


if __name__ == "__main__":
    main()
