"""Major compaction on Spark: one task per bucket of the partition, the driver commits.

Which process runs what:

* **driver** (:func:`major_on_spark`, called by the :class:`~acidstream.compaction.worker.Worker`):
  the compactor txn, the snapshot and the directory state; it sends one job per bucket,
  collects the row counts, and the worker commits the txn. Nothing is visible before that
  commit, so a failed or lost task only leaves files under an invisible ``_v`` directory.
* **executors** (:func:`_bucket_task`): read ``bucket_N`` of the base and insert deltas,
  drop aborted events and deleted rows (the delete deltas' ``bucket_N``: Hive keeps delete
  events with the rows they name), sort, write ``base_<hwm>_v<ctxn>/[<lb dir>/]bucket_N``
  (one file per list-bucketing directory the rows came from).

Jobs are picklable: paths, the frozen state and snapshot dataclasses, the schema spec and
ORC options; each executor opens its own filesystem handle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acidstream.acid import layout
from acidstream.acid.directory import AcidState
from acidstream.acid.orc_options import OrcWriterOptions
from acidstream.acid.schema import TableSchema
from acidstream.acid.snapshot import ValidCompactorWriteIdList
from acidstream.acid.storage import Storage
from acidstream.compaction.rewrite import (
    CompactorSnapshot,
    RewriteResult,
    empty_events,
    is_event_only,
    lb_groups,
    merged_events,
    row_type_of,
    sort_events,
    write_bucket_file,
    writer_ids,
)

__all__ = ["major_on_spark"]


@dataclass(frozen=True)
class _BucketJob:
    part_dir: str
    out_dir: str
    state: AcidState
    bucket: int
    schema_spec: str
    snapshot: CompactorSnapshot
    options: OrcWriterOptions
    # The filesystem's options (endpoint, credentials), pickled to the executor.
    storage_options: Mapping[str, Any] = field(default_factory=dict)


def _bucket_task(job: _BucketJob) -> tuple[int, int]:
    """Executor: compact one bucket; returns (bucket, rows written)."""
    storage, _ = Storage.for_path(job.part_dir, storage_options=job.storage_options)
    schema = TableSchema.parse(job.schema_spec)
    events = merged_events(job.state, job.snapshot, storage, schema, bucket=job.bucket)
    if events is None:
        events = empty_events(row_type_of(schema))
    elif events.num_rows:
        other = set(writer_ids(events.column("b")).tolist()) - {job.bucket}
        if other:
            raise ValueError(
                f"bucket_{job.bucket:05d} files hold rows of writer ids {sorted(other)}: "
                "compact this partition with the local engine"
            )
    row_type = events.schema.field("row").type
    n = 0
    # One file per list-bucketing directory the bucket's rows came from.
    for lb, ev in lb_groups(events):
        n += write_bucket_file(
            storage, job.out_dir, schema, job.bucket, sort_events(ev), kind="base",
            options=job.options, row_type=row_type, lb_dir=lb,
        )  # fmt: skip
    return job.bucket, n


def major_on_spark(
    spark: Any,
    part_dir: str,
    state: AcidState,
    *,
    schema: TableSchema,
    write_ids: ValidCompactorWriteIdList,
    compactor_txn_id: int,
    options: OrcWriterOptions,
    storage_options: Mapping[str, Any] | None = None,
) -> RewriteResult | None:
    """Driver: run a major compaction of one partition as one Spark task per bucket.

    Returns ``None`` when the partition cannot be split by bucket (original or raw
    files, or files not named ``bucket_N``): the caller compacts it locally then.
    ``storage_options``: the filesystem's (endpoint, credentials), for the executors.
    """
    if not is_event_only(state):
        return None
    dirs = ([state.base] if state.base is not None else []) + list(state.deltas)
    ids = {f.bucket_id for d in dirs for f in d.files if f.logical_length}
    if None in ids:
        return None
    buckets = sorted(b for b in ids if b is not None) or [0]
    out_dir = f"{part_dir.rstrip('/')}/" + layout.base_dir_name(
        write_ids.high_watermark, visibility_txn_id=compactor_txn_id
    )
    snapshot = CompactorSnapshot.of(write_ids)
    jobs = [
        _BucketJob(
            part_dir,
            out_dir,
            state,
            b,
            schema.to_spec(),
            snapshot,
            options,
            storage_options=storage_options or {},
        )
        for b in buckets
    ]
    results = spark.sparkContext.parallelize(jobs, len(jobs)).map(_bucket_task).collect()
    return RewriteResult((out_dir,), sum(n for _, n in results), 0, len(results))
