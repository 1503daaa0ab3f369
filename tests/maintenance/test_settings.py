"""MaintenanceSettings: typed, checked, and every key in the shipped conf files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lakecore.errors import InvalidArgumentError
from lakecore.maintenance.settings import MaintenanceSettings

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize("env", ["local", "prod"])
def test_the_shipped_settings_load_and_name_every_key(env: str) -> None:
    path = CONF / f"maintenance-{env}.json"
    settings = MaintenanceSettings.load(path)
    assert set(json.loads(path.read_text())) == {
        f.name for f in dataclasses.fields(MaintenanceSettings)
    }
    assert settings.gc_delete_batch_size <= 1000 and settings.flush_max_redos >= 0


def test_a_mistyped_key_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        MaintenanceSettings.from_mapping({"gc_older_then": "3d"}, "conf/x.json")
    message = str(caught.value)
    assert (
        "unknown setting gc_older_then" in message
        and "gc_older_than" in message
        and "flush_fill" in message
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"flush_fill": "half"}, "flush_fill must be a float"),
        ({"flush_max_redos": True}, "flush_max_redos must be a int"),
        ({"flush_fill": 1.5}, "flush_fill must be between 0 and 1"),
        ({"gc_delete_batch_size": 5000}, "gc_delete_batch_size must be 1..1000"),
        ({"gc_older_than": "soon"}, "gc_older_than"),
        ({"subtree_tasks_per_core": 0}, "subtree_tasks_per_core must be at least 1"),
    ],
)
def test_bad_values_are_refused(data: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        MaintenanceSettings.from_mapping(data)


def test_defaults_and_ints_for_floats() -> None:
    settings = MaintenanceSettings.from_mapping({"commit_timeout_seconds": 60})
    assert settings.commit_timeout_seconds == 60.0 and isinstance(
        settings.commit_timeout_seconds, float
    )
    assert settings == dataclasses.replace(MaintenanceSettings(), commit_timeout_seconds=60.0)
