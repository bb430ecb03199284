"""The checkout's own airsspec.toml is the commented default, pointed at the example workspace."""

from __future__ import annotations

from airsspec.config import load_settings
from airsspec.settings import DEFAULT_TOML, Settings, WorkspaceSettings
from tests.conftest import REPO


def test_checkout_config_is_the_default_but_for_the_example_path() -> None:
    config = REPO / "airsspec.toml"
    assert load_settings(config, env={}) == Settings(
        workspace=WorkspaceSettings(path=".airsspec-example")
    )
    body = DEFAULT_TOML.replace('path = ".airsspec"', 'path = ".airsspec-example"', 1)
    assert config.read_text(encoding="utf-8").endswith(body)  # comments stay in step too
