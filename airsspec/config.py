"""Loading ``airsspec.toml``: the settings a command reads, made without pydantic when every
value is one this module is certain of.

Precedence: defaults < ``airsspec.toml`` < environment (``AIRSSPEC_<SECTION>_<KEY>``, for example
``AIRSSPEC_LOG_DURABILITY=batch`` or ``AIRSSPEC_MEMORY_HOT_WINDOW_SIZE=40``; one that names no
section, and is none of the project's other variables (``NOT_SETTINGS``), is warned of). The
models of ``airsspec.settings`` declare every section and validate it; importing pydantic and
building them was most of what a short command paid to start. So a file whose every key holds its
default or one of a choice's names (``airsspec init``'s file, ``AIRSSPEC_COLD_EMBEDDER=hash``)
is read into ``Plain`` objects from ``settings_table`` (emitted from those models): the values
validation would give, as given. Anything else (a changed number, an unknown key, a bad value)
is validated by the models as ever, so errors and values are theirs.
``tests/airsspec/test_settings_load.py`` holds the two equal on generated files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from airsspec.discovery import configs_above
from airsspec.errors import SettingsError
from airsspec.settings_table import FIELDS
from airsspec.settings_values import fresh, kept_values
from airsspec.tomlfile import read_toml

if TYPE_CHECKING:
    from airsspec.settings import Settings

ENV_PREFIX = "AIRSSPEC_"
NOT_SETTINGS = (
    "AIRSSPEC_USER",  # the scope of the CLI and the MCP server (projections.scopes)
    "AIRSSPEC_AGENT",
    "AIRSSPEC_PROJECT",
    "AIRSSPEC_TOKEN",  # the light client's token (airsspec.client)
    "AIRSSPEC_NO_SERVER",  # the full command runs, never the light client
    "AIRSSPEC_MODELS",  # where model files are kept (projections.embedders)
    "AIRSSPEC_PURE_PYTHON",  # the C extension (eventlog.native)
    "AIRSSPEC_REQUIRE_NATIVE",
    "AIRSSPEC_COUNT_CPU",  # the test suite's (tests/)
    "AIRSSPEC_COUNT_SUBPROCESSES",
    "AIRSSPEC_RAY_TESTS",
    "AIRSSPEC_S3_TEST_SECONDS",
)
"""The ``AIRSSPEC_`` variables the project reads that are not settings: any other that names
no section is warned of (``_unknown_variable``)."""
_WARNED: set[str] = set()  # the variables warned of by this process
DEFAULT_PATH: str = FIELDS["workspace"]["path"][0]
"""Where a workspace lives by default, relative to its ``airsspec.toml``."""


class Plain:
    """A section (or the whole settings) made from values proved valid, without pydantic: each
    field is a plain attribute; anything else (a method such as ``tier_url``, ``model_dump``,
    equality) is the model's, made from the same values on first use (``validated``)."""

    def __init__(self, section: str | None, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_section", section)  # None: the whole settings
        object.__setattr__(self, "_model", None)
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy and pickle look these up: the object's own answer
            raise AttributeError(name)
        return getattr(validated(self), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are frozen: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return bool(validated(self) == validated(other))

    def __hash__(self) -> int:
        return hash(validated(self))

    def __repr__(self) -> str:
        return repr(validated(self))


def validated(value: Any) -> Any:
    """The pydantic model of a ``Plain`` (``model_construct``: its values are valid); any
    other value as it is. For code that needs the model itself (``isinstance``, a copy)."""
    if not isinstance(value, Plain):
        return value
    model = value.__dict__["_model"]
    if model is None:
        from airsspec.settings import SECTIONS, Settings

        section = value.__dict__["_section"]
        fields = {k: validated(v) for k, v in value.__dict__.items() if not k.startswith("_")}
        model = (Settings if section is None else SECTIONS[section]).model_construct(**fields)
        object.__setattr__(value, "_model", model)
    return model


def load_settings(config: Path | None, env: Mapping[str, str] | None = None) -> Settings:
    """Load settings from ``config`` (None: defaults only) and the environment."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    source = "defaults"
    if config is not None:
        source = str(config)
        try:
            data = read_toml(config)
        except (OSError, ValueError) as exc:  # not UTF-8, not TOML
            raise SettingsError(f"{config}: {exc}") from exc
    settings = validate(data, source)
    overrides = _env_overrides(env)
    if not overrides:
        return settings
    for section, values in overrides.items():
        data.setdefault(section, {}).update(values)
    return validate(data, "environment")


def validate(data: dict[str, Any], source: str) -> Settings:
    """``data`` as settings: ``Plain`` when every section is ``kept``, else validated by the
    models (``airsspec.settings.validate``: its errors name ``source``)."""
    settings = plain_settings(data)
    if settings is None:
        from airsspec.settings import validate as by_models

        settings = by_models(data, source)
    if "\0" in settings.workspace.path:  # no folder is named so (open() raises ValueError)
        path = settings.workspace.path
        raise SettingsError(f"{source}: [workspace] path: holds a NUL character (got {path!r})")
    return settings


def plain_settings(data: dict[str, Any]) -> Settings | None:
    """``data`` as ``Plain`` settings when every section is known, a table and ``kept``; None
    otherwise (the models decide)."""
    if not data.keys() <= FIELDS.keys():
        return None
    sections: dict[str, Any] = {}
    for name in FIELDS:
        given = data.get(name, {})
        kept = kept_values(name, given) if isinstance(given, dict) else None
        if kept is None:
            return None
        defaults = {k: fresh(default) for k, (default, _) in FIELDS[name].items()}
        sections[name] = Plain(name, defaults | kept)
    return cast("Settings", Plain(None, sections))


_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The settings ``AIRSSPEC_<SECTION>_<KEY>`` variables give, each text read as its key's
    type, exactly: a count as a whole number ("40", not "40.0", " 40 " or "4_0"), a number as
    a decimal, a switch as true or false, a list as JSON; else ``SettingsError`` naming the
    variable."""
    overrides: dict[str, dict[str, Any]] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section = next((s for s in FIELDS if rest.startswith(s + "_")), None)
        if section is None:
            if name not in NOT_SETTINGS:
                _unknown_variable(name)
            continue
        key = rest[len(section) + 1 :]
        default = FIELDS[section].get(key, (None,))[0]  # an unknown key: the models name it
        overrides.setdefault(section, {})[key] = _typed(name, raw, default)
    return overrides


def _unknown_variable(name: str) -> None:
    """Warn, once per process, that variable ``name`` names no setting, with the closest
    variable the project reads when one is close. A warning, not an error: a user may keep
    variables of their own under the prefix; a misspelt one was ignored without a word."""
    if name in _WARNED:
        return
    _WARNED.add(name)
    import difflib
    import logging

    known = [f"{ENV_PREFIX}{s}_{k}".upper() for s, keys in FIELDS.items() for k in keys]
    rests = {v[len(ENV_PREFIX) :].lower(): v for v in (*known, *NOT_SETTINGS)}
    close = difflib.get_close_matches(name[len(ENV_PREFIX) :].lower(), rests, n=1)
    hint = f"; did you mean {rests[close[0]]}?" if close else ""
    shown = name.encode("unicode_escape").decode("ascii")  # one line, no terminal controls
    if len(shown) > 80:
        shown = f"{shown[:80]}... ({len(name)} characters)"
    logging.getLogger(__name__).warning(
        "environment %s names no setting (sections: %s)%s", shown, ", ".join(FIELDS), hint
    )


def _typed(name: str, raw: str, default: object) -> Any:
    """The environment's text ``raw`` of variable ``name`` as the type of ``default``."""
    if raw.startswith("["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"environment {name}: not a JSON list: {exc}") from exc
    if isinstance(default, bool):
        if raw.lower() not in ("true", "false"):
            raise SettingsError(f"environment {name}: true or false, not {raw!r}")
        return raw.lower() == "true"
    if isinstance(default, int) and not _WHOLE.fullmatch(raw):
        raise SettingsError(f"environment {name}: a whole number, not {raw!r}")
    if isinstance(default, float) and not _DECIMAL.fullmatch(raw):
        raise SettingsError(f"environment {name}: a number, not {raw!r}")
    return type(default)(raw) if isinstance(default, int | float) else raw


def config_of_workspace(root: Path) -> Path | None:
    """The ``airsspec.toml`` at or above ``root`` whose ``[workspace] path`` is ``root``."""
    target = root.resolve()
    for candidate in configs_above(target):
        folder = candidate.parent
        try:
            data = read_toml(candidate)
        except (OSError, ValueError):
            return candidate  # it may be this workspace's: load_settings reports what is wrong
        section = data.get("workspace", {})
        path = section.get("path", DEFAULT_PATH) if isinstance(section, dict) else None
        if isinstance(path, str) and "\0" in path:
            return candidate  # no folder is named so: load_settings reports it
        if isinstance(path, str) and (folder / path).resolve() == target:
            return candidate
    return None
