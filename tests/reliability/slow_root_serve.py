"""``lakecore serve`` on a disk whose root writes take as long as S3's: for the crash suite.

On local disk a batch writes its files and its root within a millisecond or two, so a kill
aimed from outside at "after the metadata files, before the root" or "after the root, before
the answers" rarely lands there; on S3 each of those steps is a request of 20 ms or more. This
runs the real command (``lakecore.cli.main``, argv as for ``python -m lakecore.cli``) with one
change: every exclusive create of a root file waits ``ROOT_DELAY_SECONDS`` before it and after
it, as a root PUT through the latency proxy does. Nothing else differs.

    python -m tests.reliability.slow_root_serve -l LAKE serve --allow-anonymous ...
"""

from __future__ import annotations

import sys
import time
from typing import Final

from lakecore.cli import main
from lakecore.core.locations import is_root_node_file_name
from lakecore.core.storage import Storage

ROOT_DELAY_SECONDS: Final = 0.04

_create_exclusive = Storage.create_exclusive


def _slow_create_exclusive(self: Storage, path: str, data: bytes) -> None:
    if not is_root_node_file_name(path):
        _create_exclusive(self, path, data)
        return
    time.sleep(ROOT_DELAY_SECONDS)
    try:
        _create_exclusive(self, path, data)
    finally:
        time.sleep(ROOT_DELAY_SECONDS)


if __name__ == "__main__":
    Storage.create_exclusive = _slow_create_exclusive  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
