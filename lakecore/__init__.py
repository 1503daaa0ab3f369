"""lakecore: the TrinityLake lakehouse format in Python.

``Lakehouse`` is the catalog API; ``lakecore.core.tree`` the B-epsilon tree; ``lakecore.maintenance``
the engine-neutral units of work that the Spark jobs in ``jobs/`` distribute.
"""

from lakecore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CorruptNodeFileError,
    InvalidLocationError,
    InvalidNameError,
    LakecoreError,
    NamespaceNotEmptyError,
    NotFoundError,
    UnsupportedFormatVersionError,
    VersionExpiredError,
)

__version__ = "0.1.0"

__all__ = [
    "AlreadyExistsError",
    "CommitConflictError",
    "CorruptNodeFileError",
    "InvalidLocationError",
    "InvalidNameError",
    "LakecoreError",
    "Lakehouse",
    "NamespaceNotEmptyError",
    "NotFoundError",
    "UnsupportedFormatVersionError",
    "VersionExpiredError",
    "clear_caches",
]


def clear_caches() -> None:
    """Forget every cached node, lakehouse definition and decoded lookup block of this process.

    Files are immutable, so the caches are never wrong about a file that exists; a check that
    must notice files deleted behind its back (fsck, validate, tests) reads past them or
    clears them first."""
    from lakecore.core.lookup.blockcache import SHARED_BLOCK_CACHE
    from lakecore.core.tree.store import SHARED_CACHE
    from lakecore.core.view import clear_definition_cache

    SHARED_CACHE.clear()
    clear_definition_cache()
    SHARED_BLOCK_CACHE.clear()


def __getattr__(name: str) -> object:
    # Lazy: `import lakecore` stays cheap (the Airflow DAGs and the CLI's --help import it).
    if name == "Lakehouse":
        from lakecore.lakehouse import Lakehouse

        return Lakehouse
    raise AttributeError(f"module 'lakecore' has no attribute {name!r}")
