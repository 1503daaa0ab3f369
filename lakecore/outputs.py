"""Files a command writes on the operator's machine: JSON reports and HTML pages.

Rules:

- **Local paths only.** A report or page is written where the command runs; a URI
  (``s3://bucket/report.json``) is refused as the command line is read
  (``argparsing.output_file``), not written to a folder named ``s3:`` in the working directory.
- **Atomic, and safe to race.** The text goes to a temporary file with a unique name in the
  target's folder, then ``os.replace`` puts it in place: a reader sees the old file or the new
  one, never a torn one, and two runs given the same path (a job started twice at once) each
  publish a whole file of their own; the last one wins. A fixed temporary name (``PATH.tmp``)
  let one run rename the other's half-written file, or fail because it was gone.
- The target's folder is made when missing (the command line checked that it can be).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path


def write_text_atomically(path: str | Path, text: str) -> str:
    """Write ``text`` (UTF-8) to ``path`` as described above; returns the path written.
    OSError as the file system raises it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fresh name opened exclusively: the file gets the umask's mode like any other the
    # command writes (mkstemp's 0600 would hide a report from its readers).
    temp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temp, "x", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return str(target)
