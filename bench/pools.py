"""Candidate pools kept for re-scoring: what a k=10 ``query_memory`` ranked, with score parts.

A benchmark asks each question once through a ``PoolRecall`` and keeps the whole pool; a knob
(weights, session diversity) is then measured by re-scoring the pools in process, as
``query_memory`` scores them (one hit per message, none under the relevance floor), without
importing or embedding again. A pool cut to the best k under the defaults would favour them.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from typing_extensions import override

from projections.policies import RecallWeights
from projections.recall import DIALOGUE_HITS, Recall, _Candidate
from projections.units import TURN_TYPES

WEIGHTS = (
    "weight_semantic",
    "weight_focus",
    "weight_lexical",
    "weight_recency",
    "weight_anchor",
    "weight_speaker",
)
"""The weights a knob sets, in order: ``RecallWeights`` fields and ``[cold]`` keys."""


class PoolRecall(Recall):
    """``query_memory`` that keeps every candidate it ranked, with its score parts."""

    last_pool: list[tuple[str, dict[str, float]]]  # (unit id, parts)

    @override
    def _rank(
        self, query: str, candidates: dict[str, _Candidate]
    ) -> list[tuple[str, float, dict[str, float]]]:
        ranked = super()._rank(query, candidates)
        self.last_pool = [(u, parts) for u, _, parts in ranked]
        return ranked

    def pool(self, key: str) -> list[dict[str, Any]]:
        """The last query's pool: each candidate's unit id, log session, score parts,
        ``meta[key]`` (what the benchmark scores: a turn id, a session uuid), and whether it is
        a conversation turn (None: not a message)."""
        table = self.store.open()
        ids = [u for u, _ in self.last_pool]
        if not ids or table is None:
            return []
        quoted = ", ".join("'" + u.replace("'", "''") + "'" for u in ids)
        search = table.search().where(f"unit_id IN ({quoted})")
        rows = (
            search.select(["unit_id", "meta", "vector", "kind", "type"]).limit(len(ids)).to_list()
        )
        found = {r["unit_id"]: r for r in rows}
        return [
            {
                "unit_id": u,
                "session": u.rsplit(":", 2)[0],
                "parts": parts,
                "key": json.loads(found[u]["meta"] or "{}").get(key),
                "vector": found[u]["vector"],
                "turn": found[u]["type"] in TURN_TYPES if found[u]["kind"] == "message" else None,
            }
            for u, parts in self.last_pool
        ]


PARTS = ("semantic", "focus", "lexical", "recency", "anchor", "speaker")


class Pool:
    """One question's pool as arrays, re-scored fast: a grid re-scores each pool thousands of
    times."""

    def __init__(self, candidates: list[dict[str, Any]]) -> None:
        ordered = sorted(candidates, key=lambda c: c["unit_id"])  # ties: by unit id
        self.parts = np.array([[c["parts"][p] for p in PARTS] for c in ordered]).reshape(-1, 6)
        messages = [c["unit_id"].rsplit(":", 1)[0] for c in ordered]
        self.message = np.unique(messages, return_inverse=True)[1]
        self.session = np.unique([c["session"] for c in ordered] or [""], return_inverse=True)[1]
        self.keys = [c["key"] for c in ordered]
        # 1: a conversation turn, 0: another message (a tool call, its output), -1: not a message
        self.turns = np.array([{True: 1, False: 0, None: -1}[c.get("turn", True)] for c in ordered])
        dim = next((len(c["vector"]) for c in ordered if c["vector"] is not None), 1)
        vectors = [c["vector"] if c["vector"] is not None else [0.0] * dim for c in ordered]
        self.vectors = np.array(vectors, dtype=np.float32).reshape(len(ordered), dim)


def rescore(
    pool: Pool,
    weights: tuple[float, ...],
    diversity: float = 0.0,
    similarity: float = 0.0,
    same_session: bool = False,
    cap: int = 0,
    reach: float = 0.0,
    dialogue: float = 0.0,
    feedback: float = 0.0,
    feedback_hits: int = 0,
    extra: np.ndarray | None = None,
) -> list[Any]:
    """The keys of the best 10 of ``pool`` under ``weights`` (in ``WEIGHTS`` order) as
    ``query_memory`` picks them: one per message, none under the relevance floor, and with
    ``diversity`` picked greedily, each pick's score lowered by ``diversity`` for every hit
    already picked from its log session (a message whose speaker the query names is not), among
    the hits scoring at least ``reach`` times the best (the others after, in order), when at
    least ``dialogue`` of the messages among them (of the first ``DIALOGUE_HITS``) are conversation
    turns. With ``feedback``, a second round within the pool (pseudo-relevance feedback: a
    multi-hop answer's second passage resembles the first): each hit's score is raised by
    ``feedback`` times its highest cosine with one of the first ``feedback_hits`` hits (not
    itself), and the hits re-ordered, before diversity. ``extra`` (one value per candidate, in
    the pool's order) is added to each score: a part measured before ``RecallWeights`` has it."""
    if not len(pool.keys):
        return []
    chosen = RecallWeights(**dict(zip(WEIGHTS, weights, strict=True)))
    scores = pool.parts @ np.array(weights[:6])
    scores = np.round(scores if extra is None else scores + extra, 6)
    order = np.argsort(-scores, kind="stable")
    order = order[(scores[order] > 0) & (scores[order] >= chosen.min_score)]
    _, firsts = np.unique(pool.message[order], return_index=True)
    kept = order[np.sort(firsts)]  # each message's best chunk, best first
    if feedback and feedback_hits and len(kept):
        first = kept[:feedback_hits]
        near = pool.vectors @ pool.vectors[first].T
        near[first, np.arange(len(first))] = -1.0  # a hit is not its own evidence
        scores = scores + feedback * np.clip(near.max(axis=1), 0.0, None)
        kept = kept[np.argsort(-scores[kept], kind="stable")]
    if not diversity and not similarity and not cap:
        return [pool.keys[i] for i in kept[:10]]
    reached = scores[kept] >= reach * scores[kept[0]] if len(kept) else kept.astype(bool)
    said = pool.turns[kept[:DIALOGUE_HITS][reached[:DIALOGUE_HITS]]]
    said = said[said >= 0]
    if dialogue and (not len(said) or said.sum() < dialogue * len(said)):  # not a dialogue
        return [pool.keys[i] for i in kept[:10]]
    rest, kept = kept[~reached], kept[reached]
    left, taken = scores[kept].astype(float), np.zeros(int(pool.session.max()) + 1)
    sessions, picked = pool.session[kept], list[Any]()
    unnamed = 1 - pool.parts[kept, PARTS.index("speaker")]  # a named speaker's turn: not lowered
    cosines = pool.vectors[kept] @ pool.vectors[kept].T
    nearest = np.zeros(len(kept))  # the highest cosine with a hit picked (of the same session)
    while len(picked) < min(10, len(kept)):
        full = (taken[sessions] >= cap) * 1e6 if cap else 0.0  # sessions holding ``cap`` hits
        lowered = diversity * taken[sessions] * unnamed
        best = int(np.argmax(left - lowered - similarity * nearest - full))
        if left[best] == -np.inf or (cap and taken[sessions[best]] >= cap):
            break
        picked.append(pool.keys[kept[best]])
        taken[sessions[best]] += 1
        left[best] = -np.inf
        near = cosines[best] if not same_session else cosines[best] * (sessions == sessions[best])
        nearest = np.maximum(nearest, near)
    return [*picked, *(pool.keys[i] for i in rest)][:10]
