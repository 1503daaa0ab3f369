"""``lakecore settings show|set``: the retention settings and properties of a lakehouse.

Rules:

* ``settings set`` changes the maximum version age (a duration such as ``7d``, or
  milliseconds), the minimum number of versions kept, per-version age overrides
  (``V=DURATION``) and properties, validated as at ``init``, in one commit; a change that
  changes nothing commits nothing and says so. It needs at least one change, and names a
  version's override once.
* ``add_age_options`` is the one definition of ``--maximum-version-age`` and its
  milliseconds twin, for ``init`` and ``settings set``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from lakecore.cli.printing import emit
from lakecore.cli.shared_options import add_property_option, open_lakehouse
from lakecore.contract.option_types import duration_millis
from lakecore.errors import ExitCode, InvalidArgumentError


def _version_duration(text: str) -> tuple[int, int]:
    """``V=DURATION``, e.g. ``12=30d``."""
    version, sep, duration = text.partition("=")
    if not sep or not version.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not VERSION=DURATION, e.g. 12=30d")
    return int(version), duration_millis(f"the age override of version {version.strip()}")(duration)


def _version_number(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a version number")
    return int(text)


def _settings_data(lh: Any) -> dict[str, Any]:
    d = lh.lakehouse_def
    return {
        "version": lh.version,
        "name": d.name,
        "maximum_version_age_millis": d.maximum_version_age_millis,
        "minimum_versions_to_keep": d.minimum_versions_to_keep,
        "maximum_version_age_millis_overrides": {
            str(k): v for k, v in sorted(d.maximum_version_age_millis_overrides.items())
        },
        "properties": dict(sorted(d.properties.items())),
        "read_only": lh.read_only_reason,
    }


def _settings_text(data: dict[str, Any]) -> str:
    from lakecore.core.units import format_duration_millis

    lines = [
        f"lakehouse {data['name']!r} at version {data['version']}",
        f"  maximum version age     {format_duration_millis(data['maximum_version_age_millis'])}",
        f"  minimum versions kept   {data['minimum_versions_to_keep']}",
    ]
    for version, age in data["maximum_version_age_millis_overrides"].items():
        lines.append(f"  age override            version {version}: {format_duration_millis(age)}")
    for key, value in data["properties"].items():
        lines.append(f"  property                {key} = {value}")
    if data["read_only"]:
        lines.append(f"  read-only: {data['read_only']}")
    return "\n".join(lines)


def cmd_settings(args: argparse.Namespace) -> int:
    lh = open_lakehouse(args)
    if args.action == "show":
        data = _settings_data(lh)
        emit(args, _settings_text(data), data)
        return ExitCode.OK
    age = (
        args.maximum_version_age
        if args.maximum_version_age is not None
        else args.maximum_version_age_millis
    )
    if (
        age is None
        and args.minimum_versions_to_keep is None
        and not args.version_age_override
        and not args.unset_version_age_override
        and not args.property
        and not args.unset_property
    ):
        raise InvalidArgumentError(
            "settings set needs at least one change: --maximum-version-age, --minimum-versions-to-keep, "
            "--version-age-override, --unset-version-age-override, --property or --unset-property"
        )
    overrides = dict(args.version_age_override or [])
    if len(overrides) != len(args.version_age_override or []):
        raise InvalidArgumentError("--version-age-override names the same version twice")
    change = lh.update_settings(
        maximum_version_age_millis=age,
        minimum_versions_to_keep=args.minimum_versions_to_keep,
        set_version_age_overrides=overrides,
        unset_version_age_overrides=args.unset_version_age_override or [],
        set_properties=dict(args.property or []),
        unset_properties=args.unset_property or [],
    )
    data = {**_settings_data(lh), "committed": change.committed}
    if change.committed:
        head = f"settings changed in version {change.version}"
    else:
        head = (
            f"settings unchanged: they already hold; nothing committed (version {change.version})"
        )
    emit(args, head + "\n" + _settings_text(data), data)
    return ExitCode.OK


def add_age_options(p: argparse.ArgumentParser) -> None:
    """``--maximum-version-age DURATION`` and its plain-milliseconds twin (init and settings set)."""
    ages = p.add_mutually_exclusive_group()
    ages.add_argument(
        "--maximum-version-age",
        dest="maximum_version_age",
        metavar="DURATION",
        type=duration_millis("--maximum-version-age"),
        help="how long versions are retained, e.g. 7d, 12h, 90m, 30s, 250ms",
    )
    ages.add_argument(
        "--maximum-version-age-millis",
        dest="maximum_version_age_millis",
        type=int,
        metavar="MILLIS",
        help="the same in milliseconds",
    )


def add_commands(sub: Any, subcommand: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``settings`` command; ``subcommand(sub, name, help, ...)`` makes a subparser with the command
    line's shared options (``--json``, ``-l/--lakehouse``)."""
    p = subcommand(sub, "settings", "show or change the retention settings and properties")
    actions = p.add_subparsers(dest="action", required=True)
    subcommand(actions, "show", "the settings in force at the latest version")
    s = subcommand(
        actions, "set", "change settings (validated as at init); a no-op commits nothing"
    )
    add_age_options(s)
    s.add_argument(
        "--minimum-versions-to-keep",
        type=int,
        metavar="N",
        help="the newest N versions never expire, whatever their age",
    )
    s.add_argument(
        "--version-age-override",
        action="append",
        type=_version_duration,
        metavar="V=DURATION",
        help="retain version V for DURATION instead (repeatable)",
    )
    s.add_argument(
        "--unset-version-age-override",
        action="append",
        type=_version_number,
        metavar="V",
        help="remove version V's override (repeatable)",
    )
    add_property_option(s, "set a property (repeatable)")
    s.add_argument(
        "--unset-property", action="append", metavar="KEY", help="remove a property (repeatable)"
    )
    p.set_defaults(func=cmd_settings)


__all__ = ["add_age_options", "add_commands", "cmd_settings"]
