"""Loading the settings without pydantic (``airsspec.config``: every value proved kept as given,
from the table emitted from the models) or section by section (``airsspec.settings._by_section``:
a section so proved is made without building its validator) gives exactly what validating the
whole gives, and a bad value the same one-line error."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airsspec import config as config_module
from airsspec.config import Plain, load_settings, plain_settings, validate, validated
from airsspec.settings import DEFAULT_TOML, SECTIONS, Settings
from eventlog.errors import SettingsError
from tests.conftest import REPO

DEFAULTS = Settings().model_dump()

# Values a TOML file or the environment may hold: each section's defaults, other members of its
# choices, near misses (an integer where a float is the default, a list for a tuple, a wrong
# name) and values of the wrong type.
ODD = st.one_of(
    st.sampled_from(["", "hash", "minilm", "batch", "off", "user", "bogus", "1", "true"]),
    st.integers(-2, 40_000),
    st.floats(-1, 2, allow_nan=False),
    st.booleans(),
    st.lists(st.sampled_from(["user", "assistant", "thought", "nope"]), max_size=6),
    st.dictionaries(st.sampled_from(["discover", "x"]), st.sampled_from(["", "go"]), max_size=2),
)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from([*SECTIONS, "nosuch"]), unique=True, max_size=4)):
        keys = list(SECTIONS[name].model_fields) if name in SECTIONS else ["key"]
        section: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from([*keys, "typo"]), unique=True, max_size=4)):
            default = DEFAULTS.get(name, {}).get(key)
            if isinstance(default, tuple):
                default = list(default)
            section[key] = draw(st.one_of(st.just(default), ODD) if default is not None else ODD)
        data[name] = section if draw(st.integers(0, 20)) else draw(ODD)  # rarely not a table
    return data


@st.composite
def near_defaults(draw: st.DrawFn) -> dict[str, Any]:
    """Files the fast path is often certain of: each value a default, one of a choice's
    names (as ``Literal`` declares them), or an odd one."""
    data: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(list(SECTIONS)), unique=True, max_size=5)):
        fields = SECTIONS[name].model_fields
        section: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from(list(fields)), unique=True, max_size=5)):
            default = DEFAULTS[name][key]
            names = [n for n in get_args(fields[key].annotation) if isinstance(n, str)]
            section[key] = draw(
                st.one_of(
                    st.just(list(default) if isinstance(default, tuple) else default),
                    st.sampled_from(names or [default]),
                    ODD,
                )
            )
        data[name] = section
    return data


def whole(data: dict[str, Any]) -> Settings | str:
    """What validating ``data`` as one model gives: the settings, or the error's line."""
    from pydantic import ValidationError

    from airsspec.settings import _describe

    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        return f"test: {_describe(exc.errors()[0])}"


def ours(data: dict[str, Any]) -> Settings | str:
    try:
        return validate(data, "test")
    except SettingsError as exc:
        return str(exc)


@given(data=configs())
def test_section_by_section_gives_what_the_whole_model_gives(data: dict[str, Any]) -> None:
    expected, got = whole(data), ours(data)
    assert got == expected
    if isinstance(got, Settings):
        assert got.model_dump() == expected.model_dump()  # type: ignore[union-attr]
        for name in SECTIONS:  # the same types too (a tuple stays a tuple)
            assert repr(getattr(got, name)) == repr(getattr(expected, name))


@given(data=st.one_of(configs(), near_defaults()))
def test_plain_settings_hold_what_the_models_give_field_by_field(data: dict[str, Any]) -> None:
    """Where the fast path is certain (``plain_settings`` gives settings), each field holds
    the value and type validation gives; the plain object compares equal to the model and
    gives the model's methods and dump."""
    plain = plain_settings(data)
    if plain is None:
        return
    expected = whole(data)
    assert isinstance(plain, Plain) and isinstance(expected, Settings)
    for name in SECTIONS:
        section, model = getattr(plain, name), getattr(expected, name)
        for key in type(model).model_fields:
            value, want = getattr(section, key), getattr(model, key)
            assert (type(value), value) == (type(want), want), f"[{name}] {key}"
    assert plain == expected and validated(plain) == expected
    assert plain.model_dump() == expected.model_dump()
    assert plain.storage.tier_url("cold") == expected.storage.tier_url("cold")


def test_the_table_is_emitted_from_the_models() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "airsspec.settings_emit", "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_plain_settings_are_frozen_and_give_the_models_where_asked() -> None:
    plain = load_settings(None, env={"AIRSSPEC_COLD_EMBEDDER": "hash"})
    assert isinstance(plain, Plain)
    with pytest.raises(AttributeError, match="frozen"):
        plain.memory.hot_window_size = 3  # type: ignore[misc]
    cold = validated(plain.cold)
    assert type(cold) is SECTIONS["cold"] and cold.embedder == "hash"
    assert validated(cold) is cold and validated(plain.cold) is cold  # made once
    copied = plain.model_copy(update={"log": SECTIONS["log"](durability="off")})
    assert type(copied) is Settings and copied.log.durability == "off"
    assert copied.cold == plain.cold and hash(plain.log) == hash(validated(plain.log))


def test_the_default_file_and_a_bad_key_load_as_before(tmp_path: Path) -> None:
    config = tmp_path / "airsspec.toml"
    config.write_text(DEFAULT_TOML)
    assert load_settings(config, env={}) == Settings()
    assert load_settings(config, env={"AIRSSPEC_COLD_EMBEDDER": "hash"}).cold.embedder == "hash"
    with pytest.raises(SettingsError, match=r"environment: \[cold\] embedder: Input should be"):
        load_settings(config, env={"AIRSSPEC_COLD_EMBEDDER": "hashed"})
    config.write_text(DEFAULT_TOML.replace("# hot_window_size = 30", "hot_window_size = 0"))
    with pytest.raises(SettingsError, match=r"\[memory\] hot_window_size: Input should be"):
        load_settings(config, env={})
    assert tomllib.loads(DEFAULT_TOML)  # the file init writes is the one checked above


def test_the_default_file_loads_without_pydantic(tmp_path: Path) -> None:
    """``airsspec init``'s file and ``AIRSSPEC_COLD_EMBEDDER=hash`` (what a short command
    meets most) are loaded without importing pydantic, in a fresh interpreter; a changed
    number is validated by the models."""
    config = tmp_path / "airsspec.toml"
    config.write_text(DEFAULT_TOML)
    probe = (
        "import sys; from pathlib import Path\n"
        "from airsspec.config import load_settings\n"
        "s = load_settings(Path(sys.argv[1]), env={'AIRSSPEC_COLD_EMBEDDER': 'hash'})\n"
        "assert s.cold.embedder == 'hash'\n"
        "print('pydantic' in sys.modules)\n"
        "s = load_settings(Path(sys.argv[1]), env={'AIRSSPEC_MEMORY_HOT_WINDOW_SIZE': '40'})\n"
        "print('pydantic' in sys.modules, s.memory.hot_window_size)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "40"]


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        (
            '[memory]\nhot_window_size = "30"\n',
            "[memory] hot_window_size: Value error, a number, not the text '30' (got '30')",
        ),
        (
            '[memory]\ncompression_threshold = "0.5"\n',
            "[memory] compression_threshold: Value error, a number, not the text '0.5' (got '0.5')",
        ),
        (
            '[secrets]\nredact = "false"\n',
            "[secrets] redact: Value error, true or false, not the text 'false' (got 'false')",
        ),
        ("[secrets]\nredact = 0\n", "[secrets] redact: Value error, true or false, not 0 (got 0)"),
    ],
)
def test_a_value_of_another_type_in_the_file_is_refused_not_converted(
    tmp_path: Path, toml: str, problem: str
) -> None:
    config = tmp_path / "airsspec.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings(config, env={})
    assert str(caught.value) == f"{config}: {problem}"


def test_the_environment_s_text_is_read_as_each_key_s_type(tmp_path: Path) -> None:
    """An environment variable is text: there, "40" is the number 40 and "false" is false."""
    config = tmp_path / "airsspec.toml"
    config.write_text("[memory]\nchunk_size = 12\n")
    env = {"AIRSSPEC_MEMORY_HOT_WINDOW_SIZE": "40", "AIRSSPEC_SECRETS_REDACT": "false"}
    settings = load_settings(config, env=env)
    assert (settings.memory.hot_window_size, settings.memory.chunk_size) == (40, 12)
    assert settings.secrets.redact is False
    env = {"AIRSSPEC_COLD_WEIGHT_FOCUS": "0.5", "AIRSSPEC_SECRETS_REDACT": "TRUE"}
    settings = load_settings(config, env=env)
    assert (settings.cold.weight_focus, settings.secrets.redact) == (0.5, True)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("AIRSSPEC_MEMORY_HOT_WINDOW_SIZE", "40.0", "a whole number, not '40.0'"),
        ("AIRSSPEC_MEMORY_HOT_WINDOW_SIZE", " 40 ", "a whole number, not ' 40 '"),
        ("AIRSSPEC_MEMORY_HOT_WINDOW_SIZE", "4_0", "a whole number, not '4_0'"),
        ("AIRSSPEC_SECRETS_REDACT", "yes", "true or false, not 'yes'"),
        ("AIRSSPEC_SECRETS_REDACT", "0", "true or false, not '0'"),
        ("AIRSSPEC_COLD_WEIGHT_FOCUS", "inf", "a number, not 'inf'"),
        ("AIRSSPEC_COLD_WEIGHT_FOCUS", "1_0.5", "a number, not '1_0.5'"),
    ],
)
def test_the_environment_s_text_is_read_exactly_or_refused_naming_the_variable(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    """A variable's text is read as its key's type exactly as written: what Python or lax
    validation would also take ("40.0" as 40, "4_0" as 40, "yes" as true) is refused, the
    error naming the variable."""
    with pytest.raises(SettingsError, match=f"^environment {name}: {re.escape(expected)}$"):
        load_settings(None, env={name: text})


def test_a_variable_that_names_no_setting_is_warned_of_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A variable under the prefix that names no section is ignored, with one warning however
    often the settings are loaded (a command loads them more than once); the project's own
    other variables and a setting's are not warned of."""
    monkeypatch.setattr(config_module, "_WARNED", set())
    env = {"AIRSSPEC_COLDD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1", "AIRSSPEC_USER": "ana"}
    with caplog.at_level(logging.WARNING, logger="airsspec.config"):
        for _ in range(3):
            assert load_settings(None, env=env) == Settings()
        assert load_settings(None, env={"AIRSSPEC_COLD_EMBEDDER": "hash"}).cold.embedder == "hash"
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and warned[0].startswith("environment AIRSSPEC_COLDD_EMBEDDER names")
    assert warned[0].endswith("; did you mean AIRSSPEC_COLD_EMBEDDER?")
