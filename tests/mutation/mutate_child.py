"""A child process of the conflict tests: one mutation that waits, with its files written
and its txn open, right before its commit (``batch.before_commit``) until told to go.

    python -m tests.mutation.mutate_child URL WAREHOUSE KIND READY GO [RETRIES]

KIND ``set_a``: ``UPDATE default.c SET v = 'A' WHERE id < 5``; ``inc_n``: ``UPDATE ... SET
n = n + 1 WHERE id < 5``; ``del_a``: ``DELETE FROM default.c WHERE ds = 'a'``. Prints one
JSON line: ``{"ok": result}`` or ``{"error": class name, "message": ...}``. Only the first
pass through the step waits (a retry runs straight through).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pyarrow.compute as pc

import acidstream
from acidstream.acid import faults
from acidstream.acid.errors import AcidStreamError


def main(argv: list[str]) -> int:
    url, warehouse, kind, ready, go = argv[:5]
    retries = int(argv[5]) if len(argv) > 5 else 0
    waited = False

    def hook(step: str) -> None:
        nonlocal waited
        if step != "batch.before_commit" or waited:
            return
        waited = True
        Path(ready).touch()
        deadline = time.monotonic() + 60
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("never told to go")
            time.sleep(0.02)

    faults.set_hook(hook)
    t = acidstream.table("default.c", metastore=url, warehouse=warehouse)
    try:
        if kind == "set_a":
            r = t.update({"v": pc.scalar("A")}, pc.field("id") < 5, retries=retries)
        elif kind == "inc_n":
            r = t.update({"n": pc.field("n") + 1}, pc.field("id") < 5, retries=retries)
        elif kind == "del_a":
            r = t.delete(pc.field("ds") == "a", retries=retries)
        else:
            raise SystemExit(f"unknown kind {kind}")
    except AcidStreamError as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return 0
    print(json.dumps({"ok": dataclasses.asdict(r)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
