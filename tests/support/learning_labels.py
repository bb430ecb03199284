"""The hand-labelled learnings set: the rules extractor's raw detector hits on the dev Claude Code
transcripts (``../shared/data/claude-code``, never copied here), each labelled by a person.

``tests/fixtures/learnings_labels.jsonl`` holds one line per hit, without the transcripts' text:
the transcript file, the source line and record uuid, the detector, who wrote the text (role),
the sha256 of the hit's text, the label (is this a learning a developer would want carried to
the next session?) and a short reason. ``candidates()`` recomputes the hits from the data and
``score()`` joins them with the labels on (file, line, detector, sha256).

What is scored is what a cut would *carry*: a hit it keeps whose scope is not ``session``
(the session's own first request is kept as a session anchor and goes cold when the session
ends, so it is never carried and is never a positive).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from compactor.detectors import Candidate
from compactor.detectors import candidates as detect

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "claude-code"
LABELS = REPO / "tests" / "fixtures" / "learnings_labels.jsonl"
MIN_PRECISION = 0.8


def transcripts(data: Path = DATA) -> list[Path]:
    """The dev transcripts: short, tool_heavy, subagent, and the long compacted one with its
    subagents."""
    long = sorted((data / "compact").glob("*.jsonl"))
    subagents = sorted((data / "compact").glob("*/subagents/*.jsonl"))
    first = [data / "short.jsonl", data / "tool_heavy.jsonl", data / "subagent.jsonl"]
    return [*first, *long, *subagents]


def group(file: str) -> str:
    """The transcript a file belongs to (a subagent file belongs to its parent's)."""
    return file.split("/")[0].removesuffix(".jsonl")


def sha(text: str) -> str:
    """The sha256 of a hit's text (the labels hold this, not the text)."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Hit:
    """A raw detector hit located in its transcript."""

    file: str  # relative to the data folder
    line: int  # 0-based line of the record the hit came from
    uuid: str
    candidate: Candidate

    @property
    def key(self) -> tuple[str, int, str, str]:
        """What a label is joined on."""
        return (self.file, self.line, self.candidate.detector, sha(self.candidate.text))


def candidates(data: Path = DATA) -> list[Hit]:
    """Every raw detector hit on the dev transcripts, in transcript order."""
    from eventlog.importers import import_paths
    from eventlog.log import EventLog
    from eventlog.schema import CONVERSATION_TYPES

    hits: list[Hit] = []
    with tempfile.TemporaryDirectory() as folder:
        log = EventLog(Path(folder) / "log", durability="off")
        for path in transcripts(data):
            (result,) = import_paths(log, "claude-code", [path])
            records = [
                located.record
                for located in log.read(result.session)
                if located.record.type in CONVERSATION_TYPES
            ]
            file = path.relative_to(data).as_posix()
            for found in detect(records, first_request=True):
                where = found.evidence[1 if found.detector == "error_fix" else 0]
                meta = dict(where.meta) if where.meta is not None else {}
                line = where.origin.index if where.origin is not None else where.seq
                hits.append(Hit(file, line, str(meta.get("uuid", "")), found))
    return hits


def load_labels(path: Path = LABELS) -> dict[tuple[str, int, str, str], dict]:
    """The labels, by (file, line, detector, sha256)."""
    labels = {}
    for raw in path.read_text().splitlines():
        item = json.loads(raw)
        labels[(item["file"], item["line"], item["detector"], item["sha256"])] = item
    return labels


@dataclass(frozen=True, slots=True)
class Score:
    """Precision and recall of one cut on a set of labelled hits."""

    carried: int
    correct: int
    positives: int

    @property
    def precision(self) -> float:
        """Share of carried hits labelled yes (1.0 when nothing is carried)."""
        return self.correct / self.carried if self.carried else 1.0

    @property
    def recall(self) -> float:
        """Share of yes-labelled hits carried."""
        return self.correct / self.positives if self.positives else 1.0


def carried(cut: Callable[[Candidate], bool]) -> Callable[[Candidate], bool]:
    """What ``cut`` carries to later sessions: kept, and not session-scoped."""
    return lambda c: c.scope != "session" and cut(c)


def score(
    hits: Iterable[Hit],
    labels: dict[tuple[str, int, str, str], dict],
    cut: Callable[[Candidate], bool],
) -> Score:
    """``cut`` on ``hits`` against ``labels`` (every hit must be labelled)."""
    chosen = carried(cut)
    n = correct = positives = 0
    for hit in hits:
        yes = labels[hit.key]["label"] == "yes"
        positives += yes
        if chosen(hit.candidate):
            n += 1
            correct += yes
    return Score(n, correct, positives)
