"""Claude Code's settings files, edited as text: only the bytes of airsspec's own entries change.

Scopes: ``user`` (``~/.claude/settings.json``), ``project`` (``<project>/.claude/settings.json``,
usually committed: its commands name no personal path) and ``local``
(``<project>/.claude/settings.local.json``, personal, not committed: the default).

Invariants:

- Every byte outside airsspec's entries is kept: numbers such as ``1e400``, non-ASCII text,
  indentation, key order. Entries are inserted into (or cut out of) the text where the JSON
  grammar allows, in the file's own indentation; the file is never re-serialised.
- The file keeps its mode; a symbolic link is followed (the file it points to is edited, the
  link stays); a link that points nowhere is refused.
- A shape that is not Claude Code's (``"hooks": []``, ``"Stop": "echo hi"``, a group that is not
  an object) is refused with one error naming the file and the key; nothing is written.
- airsspec's entries are recognised exactly (``is_our_command``: the command install writes,
  of this version or an earlier one), never by a word in a user's command: a user's hook that
  mentions ``airsspec-hook`` is the user's, kept by install and uninstall.
- ``install`` keeps the original bytes beside the file (``<name>.airsspec-backup``), or notes
  that it created the file (``<name>.airsspec-created``). ``uninstall`` gives back the original
  bytes when nothing else changed since, removes a file it created, and otherwise removes only
  airsspec's entries (keeping the user's later changes).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from pathlib import Path
from typing import Any

from airsspec.errors import HookSettingsError

MARKER = "airsspec-hook"
SCOPES = ("local", "project", "user")
BACKUP, CREATED = ".airsspec-backup", ".airsspec-created"
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def settings_path(scope: str, project: Path, home: Path | None = None) -> Path:
    """The settings file of ``scope`` for ``project``."""
    if scope == "user":
        return (home or Path.home()) / ".claude" / "settings.json"
    if scope == "project":
        return project / ".claude" / "settings.json"
    if scope == "local":
        return project / ".claude" / "settings.local.json"
    raise HookSettingsError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")


_SUFFIX = f"  # {MARKER}"
_ACTION = re.compile(r"[A-Za-z][A-Za-z-]*")  # an event, or an earlier version's action
_HOOK_OPTIONS = ("--budget", "--recall")


def is_our_command(command: str) -> bool:
    """Whether ``command`` is one that install writes (or an earlier version wrote), exactly:
    ``PROGRAM [-c|-w PATH] hook ACTION [--budget N] [--recall N]  # airsspec-hook``, PROGRAM
    being ``airsspec`` or ``PYTHON [-P] -m airsspec``. A user's command that merely mentions
    the marker (``my-airsspec-hook.sh``, ``echo airsspec-hook``) is not ours: install and
    uninstall leave it alone."""
    if not command.endswith(_SUFFIX):
        return False
    try:
        words = shlex.split(command[: -len(_SUFFIX)])
    except ValueError:  # unbalanced quotes: nothing install wrote
        return False
    if words[:1] == ["airsspec"]:
        rest = words[1:]
    elif words[1:3] == ["-m", "airsspec"]:
        rest = words[3:]
    elif words[1:4] == ["-P", "-m", "airsspec"]:
        rest = words[4:]
    else:
        return False
    if rest[:1] in (["-c"], ["-w"]):
        rest = rest[2:]
    if len(rest) < 2 or rest[0] != "hook" or not _ACTION.fullmatch(rest[1]):
        return False
    options = rest[2:]
    return len(options) % 2 == 0 and all(
        name in _HOOK_OPTIONS and value.isdigit()
        for name, value in zip(options[::2], options[1::2], strict=True)
    )


def _is_our_hook(hook: Any) -> bool:
    return (
        isinstance(hook, dict)
        and hook.get("type") == "command"
        and isinstance(hook.get("command"), str)
        and is_our_command(hook["command"])
    )


def is_ours(group: Any) -> bool:
    """Whether a hook group holds a hook airsspec installed (``is_our_command``)."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(_is_our_hook(h) for h in hooks)


# ---------------------------------------------------------------------- the JSON text


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    assert match is not None
    return match.end()


def _items(text: str, start: int) -> list[tuple[str | None, int, int, int]]:
    """The members of the object (or elements of the array) opening at ``start``: (key or
    None, where the item starts, where its value starts, where it ends). The text is valid
    JSON (``json.loads`` read it first)."""
    close = "}" if text[start] == "{" else "]"
    pos, found = _skip(text, start + 1), []
    while text[pos] != close:
        begin, key = pos, None
        if close == "}":
            key, pos = _DECODER.raw_decode(text, pos)  # a member's name: a JSON string
            pos = _skip(text, _skip(text, pos) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, pos)
        found.append((key, begin, pos, end))
        pos = _skip(text, end)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
    return found


def _member(text: str, start: int, key: str) -> tuple[int, int, int] | None:
    """Where the last member ``key`` of the object at ``start`` begins, its value, its end
    (the last one: it is the one a JSON reader keeps)."""
    hits = [(b, v, e) for k, b, v, e in _items(text, start) if k == key]
    return hits[-1] if hits else None


def _close_of(text: str, start: int) -> int:
    _, end = _DECODER.raw_decode(text, start)
    return end - 1


def _unit(text: str) -> str | None:
    """The file's indentation unit (None: a file written on one line)."""
    top = _skip(text, 0)
    items = _items(text, top)
    if not items:
        return "  "
    between = text[top + 1 : items[0][1]]
    if "\n" not in between:
        return None
    return between.rsplit("\n", 1)[1] or "  "


def _depth(text: str, pos: int) -> int:
    """How many containers enclose ``pos`` (strings skipped)."""
    depth, i = 0, 0
    while i < pos:
        ch = text[i]
        if ch == '"':
            _, i = _DECODER.raw_decode(text, i)
            continue
        depth += ch in "{["
        depth -= ch in "}]"
        i += 1
    return depth


def _insert(text: str, start: int, item: str) -> str:
    """``text`` with ``item`` (``"key": value`` or a value) added last to the container
    opening at ``start``, on its own line in the file's indentation and line ending."""
    unit, depth = _unit(text), _depth(text, start) + 1
    newline = "\r\n" if "\r\n" in text else "\n"
    if unit is not None:
        item = item.replace("\n", newline + unit * depth)
    items = _items(text, start)
    if items:
        sep = "," + newline + unit * depth if unit is not None else ", "
        end = items[-1][3]
        return text[:end] + sep + item + text[end:]
    close = _close_of(text, start)
    inner = (
        f"{newline}{unit * depth}{item}{newline}{unit * (depth - 1)}" if unit is not None else item
    )
    return text[: start + 1] + inner + text[close:]


def _remove(text: str, start: int, index: int) -> str:
    """``text`` without item ``index`` of the container opening at ``start`` (and its comma)."""
    items = _items(text, start)
    if len(items) == 1:
        return text[: start + 1] + text[_close_of(text, start) :]
    if index == 0:
        return text[: items[0][1]] + text[items[1][1] :]
    return text[: items[index - 1][3]] + text[items[index][3] :]


def _render(value: Any, unit: str | None) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False)


# ---------------------------------------------------------------------- reading and checking


def _read(path: Path) -> str | None:
    """The settings text (None: no file), refusing what airsspec cannot edit safely."""
    if path.is_symlink() and not path.exists():
        raise HookSettingsError(f"{path}: a symbolic link to nothing ({os.readlink(path)})")
    if not path.exists():
        return None
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise HookSettingsError(f"{path}: not valid JSON ({exc}); fix it first") from exc
    if not isinstance(data, dict):
        raise HookSettingsError(f"{path}: not a JSON object; fix it first")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise HookSettingsError(
            f"{path}: field 'hooks' is a {type(hooks).__name__}, expected an object of events"
        )
    for event, groups in hooks.items():
        if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups
        ):
            raise HookSettingsError(
                f"{path}: field 'hooks.{event}' is not a list of hook groups (objects with "
                f"'hooks'); found {json.dumps(groups, ensure_ascii=False)[:80]}"
            )
    return text


def _write(path: Path, data: bytes) -> None:
    """Replace the file (the target of a link) atomically, keeping its mode (a new file gets
    the umask's)."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o7777 if target.exists() else None
    partial = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)  # whatever the umask
            out.write(data)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _copy(source: Path, copy: Path) -> None:
    """``copy`` made with ``source``'s bytes and mode (settings may hold secrets)."""
    mode = source.stat().st_mode & 0o7777
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), mode)  # whatever the umask
        out.write(source.read_bytes())


# ---------------------------------------------------------------------- install and uninstall


def _cut_ours(text: str, start: int) -> tuple[str, int]:
    """``text`` without airsspec's hooks in the list of groups opening at ``start``, and how
    many groups held one: a group left with no hook goes whole, a hook the user added to
    airsspec's group (as Claude Code's ``/hooks`` menu does for the same matcher) stays."""
    groups = json.loads(text[start : _close_of(text, start) + 1])
    mine = [i for i, g in enumerate(groups) if is_ours(g)]
    for index in reversed(mine):
        hooks = groups[index]["hooks"]
        if all(_is_our_hook(h) for h in hooks):
            text = _remove(text, start, index)
            continue
        inner = _member(text, _items(text, start)[index][2], "hooks")
        assert inner is not None
        for k in reversed([k for k, h in enumerate(hooks) if _is_our_hook(h)]):
            text = _remove(text, inner[1], k)
    return text, len(mine)


def add_entries(text: str, entries: dict[str, dict[str, Any]]) -> str:
    """``text`` with one airsspec group per event (an older one replaced, an equal one kept)."""
    for event, group in entries.items():
        unit = _unit(text)
        top = _skip(text, 0)
        hooks = _member(text, top, "hooks")
        if hooks is None:
            text = _insert(text, top, '"hooks": {}')
            hooks = _member(text, top, "hooks")
            assert hooks is not None
        found = _member(text, hooks[1], event)
        if found is None:
            text = _insert(text, hooks[1], f"{json.dumps(event)}: []")
            found = _member(text, hooks[1], event)
            assert found is not None
        mine = [i for i, g in enumerate(json.loads(text[found[1] : found[2]])) if is_ours(g)]
        items = _items(text, found[1])
        if mine and json.loads(text[items[mine[0]][2] : items[mine[0]][3]]) == group:
            continue
        text, _ = _cut_ours(text, found[1])
        found = _member(text, hooks[1], event)
        assert found is not None
        text = _insert(text, found[1], _render(group, unit))
    return text


def remove_entries(text: str) -> tuple[str, int]:
    """``text`` without airsspec's groups (an event left empty, and ``hooks`` left empty,
    removed too); and how many groups were removed."""
    removed = 0
    top = _skip(text, 0)
    hooks = _member(text, top, "hooks")
    if hooks is None:
        return text, 0
    for event in list(json.loads(text[hooks[1] : hooks[2]])):
        found = _member(text, hooks[1], event)
        assert found is not None
        text, cut = _cut_ours(text, found[1])
        removed += cut
        found = _member(text, hooks[1], event)
        assert found is not None
        if cut and not json.loads(text[found[1] : found[2]]):  # the event held only ours
            index = [k for k, *_ in _items(text, hooks[1])].index(event)
            text = _remove(text, hooks[1], index)
        hooks = _member(text, top, "hooks")
        assert hooks is not None
    if removed and not json.loads(text[hooks[1] : hooks[2]]):
        index = [k for k, *_ in _items(text, top)].index("hooks")
        text = _remove(text, top, index)
    return text, removed


def _essence(settings: Any) -> Any:
    """The settings as far as uninstall can tell (an event left with no group, and ``hooks``
    left empty, are gone either way)."""
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks"), dict):
        return settings
    hooks = {event: groups for event, groups in settings["hooks"].items() if groups}
    rest = {key: value for key, value in settings.items() if key != "hooks"}
    return {**rest, "hooks": hooks} if hooks else rest


def install(path: Path, entries: dict[str, dict[str, Any]]) -> bool:
    """Merge ``entries`` (event -> hook group) into the settings file at ``path``; return
    whether the file changed. The first install keeps the original beside it."""
    text = _read(path)
    backup, created = path.with_name(path.name + BACKUP), path.with_name(path.name + CREATED)
    new = add_entries(text if text is not None else "{}\n", entries)
    if new == text:
        return False
    if not backup.exists() and not created.exists():
        if text is None:
            created.parent.mkdir(parents=True, exist_ok=True)
            created.write_text("airsspec hooks install created the file beside this one\n")
        else:
            _copy(path, backup)
    _write(path, new.encode("utf-8"))
    return True


def uninstall(path: Path) -> tuple[int, str]:
    """Remove airsspec's entries from ``path``; return how many and what became of the file
    (``restored``: the original bytes are back; ``deleted``: install had created it;
    ``edited``: other changes made since install are kept; ``unchanged``)."""
    text = _read(path)
    backup, created = path.with_name(path.name + BACKUP), path.with_name(path.name + CREATED)
    if text is None:
        created.unlink(missing_ok=True)
        return 0, "unchanged"
    new, removed = remove_entries(text)
    outcome = "edited" if removed else "unchanged"
    if backup.exists():
        original = backup.read_bytes()
        try:
            same = _essence(json.loads(original)) == _essence(json.loads(new))
        except ValueError:
            same = False
        if same:
            _write(path, original)
            backup.unlink()
            return removed, "restored"
        backup.unlink()
    elif created.exists():
        created.unlink()
        if json.loads(new) == {}:
            path.unlink()
            return removed, "deleted"
    if new != text:
        _write(path, new.encode("utf-8"))
    return removed, outcome
