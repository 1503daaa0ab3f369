"""One storage configuration for everything a catalog on S3 touches: the lakehouse's own files,
the warehouse, pyiceberg's FileIO, and what clients are told.

A server used to take its S3 settings from three places that did not meet: lakecore's storage
options (``--storage-option``) and ``AWS_ENDPOINT_URL`` reached the lakehouse, pyiceberg's
``s3.*`` properties reached the table files, and nothing reached the clients. A README that
showed one of them made a server whose metadata writes went to AWS's own endpoint, unsigned.

Rules:

* **The settings** are the endpoint, the region, the credentials (key, secret, session token)
  and the addressing style. Each comes from the first of: the catalog's own options (lakecore's
  ``storage_options`` - ``endpoint_url``, ``region``, ``key``, ``secret``, ``token`` - or
  pyiceberg's ``s3.endpoint``, ``s3.region``/``client.region``, ``s3.access-key-id``,
  ``s3.secret-access-key``, ``s3.session-token``, ``s3.path-style-access``); then the
  environment (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
  ``AWS_DEFAULT_REGION``); then each SDK's own default chain (credentials only: environment,
  profiles, instance roles), which botocore and pyarrow's AWS SDK read alike. A setting given
  both ways with two values is refused (``InvalidArgumentError``): which one is meant is not
  for the catalog to guess.
* **Where they go.** ``lakecore_options`` are the storage options of the lakehouse (when it is on
  S3) and of the warehouse (when it is on S3); ``fileio_properties`` are the ``s3.*``
  properties pyiceberg's FileIO is built with. Both carry the same settings, so every file the
  catalog reads or writes goes to one endpoint with one identity.
* **What a client may be told** (``client_properties``): the endpoint, the region and the
  addressing style, never credentials (those are vended per table, short-lived, scoped:
  ``lakecore.rest.credentials``). A custom endpoint implies path-style addressing (what
  S3-compatible stores and moto need); AWS's own endpoint leaves the client's default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lakecore.errors import InvalidArgumentError

# Each setting: (lakecore option keys, pyiceberg property keys), the first found wins per side.
_ENDPOINT: Final = (("endpoint_url", "client_kwargs.endpoint_url"), ("s3.endpoint",))
_REGION: Final = (("region", "client_kwargs.region_name"), ("s3.region", "client.region"))
_KEY: Final = (("key",), ("s3.access-key-id", "client.access-key-id"))
_SECRET: Final = (("secret",), ("s3.secret-access-key", "client.secret-access-key"))
_TOKEN: Final = (("token",), ("s3.session-token", "client.session-token"))
S3_SCHEMES: Final = ("s3://", "s3a://", "s3n://")


def is_s3(uri: str | None) -> bool:
    return bool(uri) and str(uri).lower().startswith(S3_SCHEMES)


def _lookup(source: Mapping[str, Any], key: str) -> Any:
    """``source[key]``; for lakecore's options ``client_kwargs.NAME`` is a nested entry."""
    if key.startswith("client_kwargs."):
        nested = source.get("client_kwargs")
        return nested.get(key.partition(".")[2]) if isinstance(nested, Mapping) else None
    return source.get(key)


def _first(source: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = _lookup(source, key)
        if value not in (None, ""):
            return str(value)
    return None


@dataclass(frozen=True)
class S3Settings:
    """The one configuration (see the module docstring); None where nothing said."""

    endpoint: str | None = None
    region: str | None = None
    key: str | None = None
    secret: str | None = None
    token: str | None = None
    path_style: bool | None = None
    # The lakehouse options given that are not among the settings above (anon, profile, ...).
    other_options: dict[str, Any] = field(default_factory=dict)

    def lakecore_options(self) -> dict[str, Any] | None:
        """Storage options for lakecore's own S3 storage (None: nothing to say)."""
        options = dict(self.other_options)
        client_kwargs = dict(options.pop("client_kwargs", None) or {})
        client_kwargs.pop("endpoint_url", None)
        client_kwargs.pop("region_name", None)
        for name, value in (("endpoint_url", self.endpoint), ("region_name", self.region)):
            if value:
                client_kwargs[name] = value
        if client_kwargs:
            options["client_kwargs"] = client_kwargs
        for name, value in (("key", self.key), ("secret", self.secret), ("token", self.token)):
            if value:
                options[name] = value
        return options or None

    def fileio_properties(self) -> dict[str, str]:
        """pyiceberg's ``s3.*`` properties for the catalog's FileIO."""
        out = {
            "s3.endpoint": self.endpoint,
            "s3.region": self.region,
            "s3.access-key-id": self.key,
            "s3.secret-access-key": self.secret,
            "s3.session-token": self.token,
        }
        return {k: v for k, v in out.items() if v}

    def client_properties(self) -> dict[str, str]:
        """What a client needs to reach the warehouse: never a credential."""
        out: dict[str, str] = {}
        if self.endpoint:
            out["s3.endpoint"] = self.endpoint
        if self.region:
            out["s3.region"] = self.region
            out["client.region"] = self.region
        path_style = self.path_style if self.path_style is not None else bool(self.endpoint)
        if self.endpoint or self.path_style is not None:
            out["s3.path-style-access"] = "true" if path_style else "false"
        return out


def s3_settings(
    storage_options: Mapping[str, Any] | None,
    properties: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> S3Settings:
    """The one configuration from a catalog's storage options and properties, and then the
    environment (see the module docstring).

    Raises:
        InvalidArgumentError: one setting given two different values.
    """
    options = dict(storage_options or {})
    env = os.environ if environ is None else environ
    values: dict[str, str | None] = {}
    for name, (option_keys, property_keys) in {
        "endpoint": _ENDPOINT,
        "region": _REGION,
        "key": _KEY,
        "secret": _SECRET,
        "token": _TOKEN,
    }.items():
        from_options = _first(options, option_keys)
        from_properties = _first(properties, property_keys)
        if from_options and from_properties and from_options != from_properties:
            shown = "the secret" if name in ("secret", "token") else f"{from_options!r}"
            raise InvalidArgumentError(
                f"the S3 {name} is given twice: storage option {option_keys[0]}={shown} and "
                f"catalog property {property_keys[0]}"
                + ("" if name in ("secret", "token") else f"={from_properties!r}")
                + "; give it once (both reach the lakehouse and the table files)"
            )
        values[name] = from_options or from_properties
    values["endpoint"] = (
        values["endpoint"] or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    )
    values["region"] = values["region"] or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    path_style_text = properties.get("s3.path-style-access")
    path_style = None if path_style_text is None else str(path_style_text).lower() == "true"
    settings_keys = {"endpoint_url", "region", "key", "secret", "token"}
    other = {k: v for k, v in options.items() if k not in settings_keys}
    return S3Settings(
        endpoint=values["endpoint"],
        region=values["region"],
        key=values["key"],
        secret=values["secret"],
        token=values["token"],
        path_style=path_style,
        other_options=other,
    )


__all__ = ["S3_SCHEMES", "S3Settings", "is_s3", "s3_settings"]
