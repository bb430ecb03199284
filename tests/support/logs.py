"""Workspaces built the quick way, for tests and benchmarks alike: a synthetic log written
record by record in the log's own encoding, and an ``airsspec init`` config set to the local
extractive summarizer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def edit_config(config: Path, *edits: tuple[str, str]) -> None:
    """Apply ``(old line, new line)`` edits to an ``airsspec init`` config, where a default is a
    commented line (``# key = value``): the new line takes its place, uncommented. An old line
    found neither way is an error, so an edit never silently misses."""
    text = config.read_text()
    for old, new in edits:
        if f"# {old}" in text:
            text = text.replace(f"# {old}", new, 1)
        elif old in text:
            text = text.replace(old, new, 1)
        else:
            raise ValueError(f"{config} has no line {old!r}")
    config.write_text(text)


def use_extractive_summarizer(config: Path, *edits: tuple[str, str]) -> None:
    """Set an ``airsspec init`` config's summarizer to the extractive one (local, no network),
    and apply the other ``(old line, new line)`` edits (``edit_config``). Only that key changes:
    other sections have an "auto" value of their own."""
    edit_config(config, ('summarizer = "auto"', 'summarizer = "extractive"'), *edits)


def write_synthetic_log(
    log_dir: str | Path,
    sessions: int,
    per_session: int,
    content: str,
    texts: Sequence[str] = (),
) -> int:
    """Write ``sessions`` logs of ``per_session`` single-append records, byte-identical to what
    ``EventLog.append`` writes (same encoder, same chain), much faster than appending one by one.
    Types cycle through user/thought/action/observation/assistant so projections see a mix.
    With ``texts``, each record's content is the next of them in turn (real language for the
    projections to index and summarize) instead of ``content``."""
    from eventlog.canonical import encode_record
    from eventlog.ids import new_event_id

    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    kinds: list[dict[str, object]] = [
        {"type": "user", "content": content},
        {"type": "thought", "content": content},
        {"type": "action", "tool": "bash", "params": {"cmd": "pytest -q"}},
        {"type": "observation", "result": content, "is_error": False},
        {"type": "assistant", "content": content},
    ]
    for s in range(sessions):
        name = f"s{s:04d}"
        prev = None
        lines = []
        for seq in range(1, per_session + 1):
            if texts:
                said = texts[(s * per_session + seq) % len(texts)]
                kinds[0]["content"] = kinds[1]["content"] = kinds[4]["content"] = said
                kinds[3]["result"] = said
            body = {
                "v": 1,
                "id": new_event_id(),
                "session": name,
                "seq": seq,
                "ts": f"2026-01-01T00:00:00.{seq % 1_000_000:06d}Z",
                "prev": prev,
                "meta": {"i": seq},
                **kinds[seq % len(kinds)],
            }
            line, prev = encode_record(body)
            lines.append(line)
        (folder / f"{name}.jsonl").write_bytes(b"".join(lines))
    return sessions * per_session
