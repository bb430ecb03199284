"""What the learnings are worth at a given moment: levels, confidence, priority and conflicts.

A pure function of the learnings tier's facts (``projections.learnings``), a clock value ``now``
(an input: a rebuild ``--as-of`` passes the time it stops at), and who is asking (a session and
its cue: task, phase and query). Nothing here reads a file or the wall clock.

Scores (each factor in 0..1):

- ``confidence = 0.30*frequency + 0.25*recency + 0.25*user_confirmation + 0.20*consistency``;
  frequency = times stated / 3 (capped), recency = 0.5 ** (days since last activity / 30),
  user_confirmation = 1 confirmed or written by the user, 0.6 said by the user, 0.3 inferred,
  consistency = statements that agree / (those + the ones that contradict it).
- ``priority = confidence*50 + access*30 + recency_bonus*20`` rounded into 1..100; access =
  log(1 + times returned) / log(1 + 20) capped at 1, recency_bonus = 0.5 ** (days / 7).

Standing (who stands behind a learning) orders everything a prompt is given, before any score:

- **0, the user's rule**: written by the user (``learnings add``, source ``user``) or confirmed
  by them;
- **1, said by the user**: stated in a session by the user (a correction, a preference, a
  decision, an answer);
- **2, inferred**: found in what the agent did or wrote (a diagnosis, an error -> fix, a decision
  it announced).

Within a tier the order is ``(standing, -priority)``, and ``prompt_order`` gives the order a
prompt takes learnings in: standing first, then hot before warm, then matching the cue, then
priority. So no access count, recency or confidence lifts an inferred learning over one the user
stated: priority only orders learnings of the same standing. An inferred learning also needs
evidence before it reaches a prompt (hot or warm): stated in at least ``EVIDENCE_SESSIONS``
distinct sessions (statements that merge count; a subagent's session is its parent's), or
confirmed; until then it is cold (still searchable), unless a session recalls it explicitly.

Tiers for a reader session S:

- **hot** (loaded into every prompt of S, at most ``hot_items`` / ``hot_tokens``, in tier
  order): anchors; learnings recorded in S while S has not ended; warm ones that match S's cue
  (warm -> hot); any learning S recalled explicitly (cold -> hot).
- **warm** (loaded at session start when relevant): project and global learnings matched or
  active within ``warm_days`` (warm -> cold after that many days with no match; the user's
  rules, standing 0, never age out), at most ``warm_items`` in tier order; a cold one that
  matches a cue becomes warm again (the match is recorded as an access). At S's end its
  learnings leave hot (hot -> warm; session-scoped ones go cold).
- **cold**: the rest; searchable only. Rejected (hot -> cold), superseded or merged learnings
  are cold and never loaded; archived ones are not loaded until restored.

Conflicts: two learnings about the same subject (content words overlap) that take opposite
sides on a word they share ("always X" / "never X"; "A over B" / "B over A": ``stance``).
Rules, in order: merge if compatible (the same side on every shared word: the later one counts
as another statement of the earlier, or the earlier of the later when the later stands higher,
so the user saying what was inferred keeps the user's standing; an error -> fix only ever
merges with the same error -> fix); explicit beats inferred; project-specific beats global;
recency wins. Every resolution is listed (learning_a, learning_b, resolution, winner, reason);
one where the older learning wins over a newer one is *open* (health asks a person).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventlog.ids import parse_ts
from eventlog.layout import MEMORY_SESSION
from projections.scopes import Scope, learning_visible

if TYPE_CHECKING:  # the model is imported where one is made: reading learnings needs no pydantic
    from projections.policies import LearningSettings

_WORD = re.compile(r"[a-z0-9_]+")
_STOP_TEXT = """
a an the and or but if then than so to of in on at by for with from into onto as is are was
were be been being it its this that these those there here we you i me my our your they them
their he she his her do does did done doing have has had having will would shall should can
could may might must please just also very really all any some each every more most other such
only own same too again once about over under up down out off what which who whom when where
why how let lets let's ok okay yes yeah sure thanks thank use using used
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
_NEGATION_TEXT = "never not no don't dont doesn't avoid stop without instead"
NEGATIONS = frozenset(_NEGATION_TEXT.split())
_POLARITY_WORDS = NEGATIONS | {"always", "prefer", "preferred", "must"}
CONFLICT_KINDS = frozenset({"correction", "preference", "decision", "pattern"})
EVIDENCE_SESSIONS = 2  # distinct sessions an inferred learning must be stated in to be loaded
SUBAGENT = ".agent-"  # a subagent's session is <session>.agent-<id>: the same conversation


def conversation(session: str) -> str:
    """The session a subagent's session belongs to (itself for any other session): a subagent
    restating its parent is no evidence from a second session."""
    return session.split(SUBAGENT, 1)[0]


def _stem(word: str) -> str:
    """A light stemmer: plurals and -ing/-ed endings (``modules`` and ``module`` meet)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """The stemmed content words of ``text`` (no stop or polarity words)."""
    words = _WORD.findall(text.lower().replace("'", ""))
    return frozenset(
        _stem(w) for w in words if w not in STOP_WORDS and w not in _POLARITY_WORDS and len(w) > 1
    )


# any negation as a word of its own (one pattern: ``assess`` asks it of every learning)
_NEGATION = re.compile(rf"(?<![a-z'])(?:{'|'.join(map(re.escape, sorted(NEGATIONS)))})(?![a-z'])")


def negative(text: str) -> bool:
    """Whether ``text`` states something not to do."""
    return _NEGATION.search(text.lower().replace("\u2019", "'")) is not None


_PIVOT = re.compile(r"\s(?:over|rather than|instead of)\s", re.I)
_LEAD = re.compile(r"^\W*(?:no|nope|actually)\b\W*", re.I)  # a correction's opening word


def stance(text: str) -> dict[str, bool]:
    """The content words of ``text``, each with whether the text is for it: "A over B" (rather
    than, instead of) is for A and against B (the other way after a negation: "never A over
    B"); any other statement is for or against all its words alike (``negative``)."""
    parts = _PIVOT.split(text, maxsplit=1)
    if len(parts) == 1:
        return dict.fromkeys(content_words(text), not negative(text))
    first = _LEAD.sub("", parts[0])
    pro = not negative(first)
    return {
        **dict.fromkeys(content_words(parts[1]), not pro),
        **dict.fromkeys(content_words(first), pro),
    }


def _agree(a: dict[str, bool], b: dict[str, bool]) -> bool:
    """Whether two stances take the same side on every word they share."""
    return all(a[w] == b[w] for w in a.keys() & b.keys())


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def matches(learning: frozenset[str], cue: frozenset[str]) -> bool:
    """Whether a learning is relevant to a cue: two shared content words, or half of the
    learning's."""
    shared = len(learning & cue)
    return shared >= 2 or (shared >= 1 and shared * 2 >= len(learning))


@dataclass(slots=True)
class Assessed:
    """One learning as it stands at ``now`` for one reader."""

    id: str
    kind: str
    text: str
    scope: str
    source: str
    explicit: bool
    session: str
    seq: int
    ts: str
    evidence: list[dict[str, Any]]
    level: str = "cold"  # hot, warm or cold: the priority band (which prompts load it)
    status: str = "active"  # active, rejected, superseded, merged, archived
    mentions: int = 1
    confirmed: bool = False
    access_count: int = 0
    last_activity: str = ""
    last_match: str = ""
    contradictions: int = 0
    confidence: float = 0.0
    priority: int = 1
    matched: bool = False  # matched the reader's cue at this moment
    superseded_by: str | None = None
    standing: int = 2  # 0 the user's rule, 1 said by the user, 2 inferred (see the module)
    seen_in: int = 1  # distinct sessions that stated it (its own and those merged into it)
    # what people did to it, oldest first: verdicts and edits, each with its actor and time
    curation: list[dict[str, Any]] = field(default_factory=list)
    # the cold unit that holds ``text``: the learning record's, or its latest edit's that gave
    # a text (what query_memory may find it by)
    unit: str = ""

    @property
    def loaded(self) -> bool:
        """Whether it goes into prompts (hot, or warm and relevant)."""
        return self.status == "active" and self.level in ("hot", "warm")

    def to_json(self) -> dict[str, Any]:
        """As ``learnings --json`` prints it."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a conflict between two learnings was resolved."""

    learning_a: str
    learning_b: str
    resolution: str  # merged or superseded
    winner: str
    reason: str
    open: bool = False  # the older learning won over a newer statement: a person should look

    def to_json(self) -> dict[str, Any]:
        """As ``health --json`` and ``learnings show`` print it."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class Assessment:
    """Every learning at ``now`` for ``reader``, the conflicts, and the sessions' facts."""

    now: str
    reader: str | None
    learnings: list[Assessed] = field(default_factory=list)
    conflicts: list[Resolution] = field(default_factory=list)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    newly_matched: list[str] = field(default_factory=list)  # cold or warm, matched now

    def by_id(self, learning_id: str) -> Assessed | None:
        """The learning with this id (an unambiguous prefix is enough), or None (an empty id
        names none, even of a single learning)."""
        if not learning_id:
            return None
        found = [a for a in self.learnings if a.id.startswith(learning_id)]
        exact = [a for a in found if a.id == learning_id]
        return (exact or found)[0] if len(exact or found) == 1 else None

    def level(self, name: str) -> list[Assessed]:
        """The active learnings of one level, best first: by standing, then priority."""
        chosen = [a for a in self.learnings if a.level == name and a.status == "active"]
        return sorted(chosen, key=lambda a: (a.standing, -a.priority, a.ts, a.id))

    def prompt_order(self) -> list[Assessed]:
        """The loaded learnings (anchors aside) in the order a prompt takes them: the user's
        rules, then what the user said, then inferred ones; within each, hot before warm,
        matching the cue first, then by priority."""
        loaded = [a for a in self.learnings if a.loaded and a.kind != "anchor"]
        return sorted(
            loaded,
            key=lambda a: (a.standing, a.level != "hot", not a.matched, -a.priority, a.ts, a.id),
        )


def _days(later: datetime, earlier: str) -> float:
    return max(0.0, (later - parse_ts(earlier)).total_seconds() / 86400.0)


def _explicit(a: Assessed) -> bool:
    return a.confirmed or a.source == "user" or a.explicit


def standing(a: Assessed) -> int:
    """0: the user's rule (written or confirmed by the user), 1: said by the user, 2: inferred."""
    if a.confirmed or a.source == "user":
        return 0
    return 1 if a.explicit else 2


def _resolve(a: Assessed, b: Assessed) -> tuple[Assessed, str]:
    """The winner of contradicting ``a`` (older) and ``b`` (newer), and why."""
    if _explicit(a) != _explicit(b):
        return (a if _explicit(a) else b), "explicit beats inferred"
    scopes = {a.scope, b.scope}
    if scopes == {"project", "global"}:
        return (a if a.scope == "project" else b), "project-specific beats global"
    return b, "recency wins"


def _edited(edits: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per learning id, what people changed of it (``edits``: ``learning_edited`` entries in
    time order): its latest ``text`` (and the ``unit`` that holds it) and ``scope``, each only
    once it was edited."""
    changes: dict[str, dict[str, Any]] = {}
    for entry in edits:
        change = changes.setdefault(entry["id"], {})
        change.update({k: entry[k] for k in ("text", "scope") if entry[k] is not None})
        if entry["text"] is not None:
            change["unit"] = entry["unit"]
    return changes


def _curated(entry: dict[str, Any]) -> dict[str, Any]:
    """A verdict or an edit as ``Assessed.curation`` lists it: what was done, by whom, when,
    why, and (an edit) the text and scope it gave."""
    done = {"action": entry.get("verdict", "edited"), "actor": entry.get("actor")}
    done |= {k: entry[k] for k in ("ts", "reason")}
    return done | {k: entry[k] for k in ("text", "scope") if entry.get(k) is not None}


def assess(
    states: Iterable[Any],
    now: str,
    *,
    reader: str | None = None,
    cue: str = "",
    settings: LearningSettings | None = None,
    count_tokens: Any = None,
    scope: Scope | None = None,
) -> Assessment:
    """The learnings of ``states`` (``LearningsState`` of every session) as they stand at
    ``now`` for ``reader`` (see the module). ``count_tokens`` bounds the hot tier's tokens.
    ``scope`` keeps only the sessions and learnings that reader scope may see
    (``projections.scopes``), so conflicts are resolved among those alone."""
    if settings is None:
        from projections.policies import LearningSettings

        settings = LearningSettings()
    cfg = settings
    scope = scope or Scope()
    moment = parse_ts(now)
    result = Assessment(now=now, reader=reader)
    recorded: list[dict[str, Any]] = []
    feedback: list[dict[str, Any]] = []
    accesses: list[dict[str, Any]] = []
    housekeeping: list[dict[str, Any]] = []
    states = list(states)  # edits (in the workspace's log) apply to learnings of any session
    edits = sorted((e for s in states for e in s.edits if e["ts"] <= now), key=lambda e: e["ts"])
    edited = _edited(edits)
    # thousands of sessions, a few owners: each owner's scope is made and judged once
    judged: dict[tuple[tuple[str, Any], ...], tuple[Scope, bool]] = {}
    read: set[str] = set()  # the sessions ``scope`` reads
    for state in states:
        recorded_owner = state.info.get("owner")
        key = tuple(sorted(recorded_owner.items())) if recorded_owner else ()
        if (known := judged.get(key)) is None:
            made = Scope.of(recorded_owner)
            known = judged[key] = (made, scope.reads(made))
        owner, readable = known
        if readable:
            read.add(state.session)
        if state.session != MEMORY_SESSION and state.info and readable:
            result.sessions[state.session] = {
                **state.info,
                "files_changed": list(state.files_changed),
                "extracted_through": state.extracted_through,
            }
        recorded += [
            item
            for item in ({**i, **edited.get(i["id"], {})} for i in state.learnings)
            if item["ts"] <= now
            and learning_visible(scope, Scope.of(item.get("owner")) or owner, item)
        ]
        feedback += [item for item in state.feedback if item["ts"] <= now]
        accesses += [item for item in state.accesses if item["ts"] <= now]
        housekeeping += [item for item in state.housekeeping if item["ts"] <= now]
    recorded.sort(key=lambda item: (item["ts"], item["session"], item["seq"]))
    items: dict[str, Assessed] = {}
    for item in recorded:
        if item["id"] not in items:  # an id is recorded once; a repeat is ignored
            items[item["id"]] = Assessed(
                **{k: item[k] for k in ("id", "kind", "text", "scope", "source", "explicit")},
                session=item["session"],
                seq=item["seq"],
                ts=item["ts"],
                evidence=item["evidence"],
                last_activity=item["ts"],
                last_match=item["ts"],
                unit=item.get("unit") or f"{item['session']}:{item['seq']}:0",
            )
    for entry in sorted(feedback, key=lambda e: e["ts"]):
        target = items.get(entry["id"])
        if target is None:
            continue
        target.last_activity = max(target.last_activity, entry["ts"])
        if entry["verdict"] == "confirmed":
            target.confirmed = True
            if target.status == "rejected":
                target.status = "active"
        elif entry["verdict"] == "rejected":
            target.status, target.confirmed = "rejected", False
        elif entry["verdict"] == "superseded":
            target.status, target.superseded_by = "superseded", entry["by"]
    for entry in sorted(feedback + edits, key=lambda e: e["ts"]):
        target = items.get(entry["id"])
        if target is not None and entry.get("verdict") != "superseded":
            target.last_activity = max(target.last_activity, entry["ts"])
            target.curation.append(_curated(entry))
    recalled: set[str] = set()
    # what a session was given counts for a reader of that session only: another user's use
    # of a shared learning would tell when they worked and what their queries matched
    if scope.named:
        accesses = [entry for entry in accesses if entry["reader"] in read]
    for entry in accesses:
        for learning_id in entry["ids"]:
            if (target := items.get(learning_id)) is not None:
                target.access_count += 1
                target.last_activity = max(target.last_activity, entry["ts"])
                if entry["purpose"] == "recall" and entry["reader"] == reader:
                    recalled.add(learning_id)
        for learning_id in entry["matched"]:
            if (target := items.get(learning_id)) is not None:
                target.last_match = max(target.last_match, entry["ts"])
    archived: set[str] = set()
    for entry in sorted(housekeeping, key=lambda e: e["ts"]):
        if entry["op"] == "archive":
            archived |= set(entry["ids"])
        else:
            archived -= set(entry["ids"])

    # Conflicts, in the order the learnings were recorded: each is compared with the active
    # ones before it about the same subject.
    # (an anchor, a request quoted as it was said, is never compared nor matched: its words
    # are not needed)
    compared = {i: a for i, a in items.items() if a.kind != "anchor"}
    words = {i: content_words(a.text) for i, a in compared.items()}
    stances = {i: stance(a.text) for i, a in compared.items()}
    sessions = {i: {conversation(a.session)} for i, a in items.items()}
    active: list[Assessed] = []
    for b in items.values():
        if b.status != "active" or b.kind == "anchor":
            continue
        opposable = b.kind in CONFLICT_KINDS  # an error -> fix repeats, it never opposes
        for a in list(active):
            if a.status != "active" or _overlap(words[a.id], words[b.id]) < 0.5:
                continue
            if (a.kind in CONFLICT_KINDS) != opposable or (not opposable and a.kind != b.kind):
                continue
            if not opposable or _agree(stances[a.id], stances[b.id]):
                # the later one counts as another statement of the earlier, unless it stands
                # higher (the user said what was inferred): then the earlier counts for it
                keep, gone = (b, a) if standing(b) < standing(a) else (a, b)
                keep.mentions += gone.mentions
                sessions[keep.id] |= sessions[gone.id]
                keep.last_activity = max(keep.last_activity, gone.last_activity)
                keep.last_match = max(keep.last_match, gone.last_match)
                keep.confirmed = keep.confirmed or gone.confirmed
                keep.contradictions += gone.contradictions
                gone.status, gone.superseded_by = "merged", keep.id
                result.conflicts.append(
                    Resolution(
                        a.id, b.id, "merged", keep.id, "compatible: the same statement again"
                    )
                )
                break
            winner, reason = _resolve(a, b)
            loser = b if winner is a else a
            winner.contradictions += 1
            loser.status, loser.superseded_by = "superseded", winner.id
            result.conflicts.append(
                Resolution(a.id, b.id, "superseded", winner.id, reason, open=winner is a)
            )
            if loser is b:
                break
        if b.status == "active":
            active.append(b)

    ended = {s for s, info in result.sessions.items() if (info.get("ended") or "~") <= now}
    reader_info = result.sessions.get(reader or "", {})
    cue_words = content_words(" ".join([cue, reader_info.get("task") or ""]))
    for a in items.values():
        if a.id in archived and a.status == "active":
            a.status = "archived"
        days = _days(moment, a.last_activity)
        recency = 0.5 ** (days / 30.0)
        frequency = min(1.0, a.mentions / 3.0)
        if a.status == "rejected":
            confirmation = 0.0
        elif a.confirmed or a.source == "user":
            confirmation = 1.0
        else:
            confirmation = 0.6 if a.explicit else 0.3
        consistency = a.mentions / (a.mentions + a.contradictions)
        a.confidence = round(
            0.30 * frequency + 0.25 * recency + 0.25 * confirmation + 0.20 * consistency, 4
        )
        access = min(1.0, math.log1p(a.access_count) / math.log1p(20))
        bonus = 0.5 ** (days / 7.0)
        a.priority = max(1, min(100, round(a.confidence * 50 + access * 30 + bonus * 20)))
        a.standing, a.seen_in = standing(a), len(sessions[a.id])
        if a.status != "active":
            continue
        a.matched = reader is not None and a.kind != "anchor" and matches(words[a.id], cue_words)
        own = a.session not in ended and a.session != MEMORY_SESSION
        own = own and (reader is None or a.session == reader)
        warm = _days(moment, a.last_match) <= cfg.warm_days
        if a.kind == "anchor":
            a.level = "hot" if a.scope != "session" or a.session == reader else "cold"
        elif a.scope == "session" and not own:
            a.level = "cold"
        elif a.standing == 2 and a.seen_in < EVIDENCE_SESSIONS and a.id not in recalled:
            a.level = "cold"  # inferred in one session only: searchable, not in prompts
        elif own or a.id in recalled or (a.matched and warm):
            a.level = "hot"  # this session's, recalled (cold -> hot), or relevant (warm -> hot)
        elif warm or a.matched or a.standing == 0:
            a.level = "warm"  # a match brings a cold one back (cold -> warm); rules never age
        if a.matched:
            result.newly_matched.append(a.id)

    # Capacities: the best of each tier stay, the rest move down one tier.
    result.learnings = sorted(items.values(), key=lambda a: (a.ts, a.session, a.seq))
    hot = [a for a in result.level("hot") if a.kind != "anchor"]
    used = 0
    for rank, a in enumerate(hot):
        tokens = count_tokens(a.text) if count_tokens else len(a.text) // 4
        if rank >= cfg.hot_items or used + tokens > cfg.hot_tokens:
            a.level = "warm"
        else:
            used += tokens
    for a in result.level("warm")[cfg.warm_items :]:
        a.level = "cold"
    return result


def gc_candidates(assessment: Assessment, settings: LearningSettings) -> dict[str, str]:
    """What ``gc`` archives (id -> why): rejected, superseded and merged learnings, and cold
    ones inactive for ``gc_days`` that no user confirmed. Anchors are kept."""
    moment = parse_ts(assessment.now)
    chosen: dict[str, str] = {}
    for a in assessment.learnings:
        if a.kind == "anchor" or a.status == "archived":
            continue
        if a.status in ("rejected", "superseded", "merged"):
            chosen[a.id] = a.status
        elif (
            a.level == "cold"
            and not a.confirmed
            and _days(moment, a.last_activity) >= settings.gc_days
        ):
            chosen[a.id] = f"cold and inactive for {settings.gc_days:g}+ days"
    return chosen
