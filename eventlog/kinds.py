"""The kinds of learning and of fact, as plain ``Literal`` types: the catalog's models
(``eventlog.schema``) declare their fields with them, and code that only lists or checks a
kind (``airsspec facts``' filter, the CLI's choices) imports them from here without building
the catalog (which imports pydantic). So are the transcript formats ``eventlog.importers``
reads: the CLI's help lists them without importing the importers.
"""

from __future__ import annotations

from typing import Literal

LearningKind = Literal["correction", "preference", "pattern", "decision", "error_fix", "anchor"]
"""What a learning is: a correction the user made, a preference ("always/never/prefer"), a
pattern seen, a decision taken, an error and its fix, or an identity anchor (the first
interaction, what the user says about themself or the project's ground rules: kept verbatim)."""
LearningScope = Literal["session", "project", "global"]
LearningSource = Literal["extractive", "anthropic", "user"]


FactKind = Literal["decision", "requirement", "file", "error_fix", "task", "user"]
"""What a fact of a session is: a decision taken, a requirement or rule stated, a file or
artefact changed, an error with its fix, a task left open (or closed), or something about the
user."""


FORMATS = ("claude-code", "openhands", "locomo")
"""The formats of other tools' transcripts ``eventlog.importers`` reads."""
