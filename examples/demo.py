"""End-to-end demo on embedded defaults: write a Hive ACID table, read it back.

Runs on the driver only (no Spark): a streaming transaction batch of five write
ids in one delta file with an intermediate footer and side-file entry per
commit, one aborted write id in the middle, a split-update delete, and a read of
the table at three snapshots. Prints what it did and how long it took.
"""

from __future__ import annotations

import argparse
import shutil
import time
from decimal import Decimal
from pathlib import Path

from acidstream.acid import bucket_codec, layout
from acidstream.acid.reader import read_path
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidTxnList, ValidWriteIdList
from acidstream.acid.storage import Storage
from acidstream.acid.writer import AcidFileWriter, write_delete_delta

SCHEMA = TableSchema.parse("id bigint, name string, amount decimal(10,2)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warehouse", default="./warehouse", help="where the demo table goes")
    ap.add_argument("--rows-per-txn", type=int, default=20_000)
    args = ap.parse_args()

    table = Path(args.warehouse) / "demo.db" / "events"
    if table.exists():
        shutil.rmtree(table)
    storage, root = Storage.for_path(str(table))
    t0 = time.perf_counter()

    # One transaction batch: write ids 1..5 share delta_0000001_0000005/bucket_00000.
    path = storage.join(root, layout.delta_dir_name(1, 5), layout.bucket_file_name(0))
    writer = AcidFileWriter(
        storage, path, SCHEMA, kind="insert", bucket_id=0, streaming=True, side_file=True
    )
    n = args.rows_per_txn
    for write_id in range(1, 6):
        base = (write_id - 1) * n
        writer.insert(
            write_id,
            ((base + i, f"user-{base + i}", Decimal(i % 1000) + Decimal("0.25")) for i in range(n)),
        )
        length = writer.flush()
        print(f"write id {write_id}: {n:,} rows, intermediate footer at byte {length:,}")
    writer.close()
    t_write = time.perf_counter() - t0

    # Write id 6 deletes every 10th row of write id 1 (split-update delete events).
    bucket = bucket_codec.encode(0, -1)  # the rows were written by writer 0, no statement id
    write_delete_delta(str(table), SCHEMA, 6, [(1, bucket, r) for r in range(0, n, 10)])

    print()
    print(f"{'snapshot':<44} {'rows':>10} {'seconds':>8}")
    for label, write_ids in (
        ("all committed (write id 3 aborted)", "demo.events:6:9223372036854775807::3"),
        ("before the delete (hwm 5, 3 aborted)", "demo.events:5:9223372036854775807::3"),
        ("write id 2 still open", "demo.events:6:2:2:3"),
    ):
        t1 = time.perf_counter()
        result = read_path(
            str(table), write_ids=ValidWriteIdList.from_string(write_ids), txns=ValidTxnList()
        )
        print(f"{label:<44} {result.num_rows:>10,} {time.perf_counter() - t1:>8.3f}")
    print()
    print(f"table: {table}  (written in {t_write:.2f}s; try: acidstream ls {table})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
