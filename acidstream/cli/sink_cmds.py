"""``acidstream run-kafka``: the Kafka-to-table Spark job (embedded defaults or a real cluster)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from acidstream.cli.main import storage_options_of

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run-kafka", help="run the Kafka-to-table streaming job from a config file"
    )
    p.add_argument("config", metavar="CONFIG", help="YAML file, e.g. configs/kafka_to_table.yaml")
    p.add_argument(
        "--bootstrap", help="Kafka bootstrap servers (overrides the config; 'embedded' starts one)"
    )
    p.add_argument("--topic", help="topic (overrides the config)")
    p.add_argument("--sample-events", type=_count, default=None, metavar="N",
                   help="produce this many sample events first (default: 100000 with the embedded "
                   "broker; 0: none, the job then runs over an empty topic)")  # fmt: skip
    p.add_argument(
        "--bad-every", type=_count, default=10_000, metavar="N",
        help="a malformed sample record after every N (0: none)",
    )  # fmt: skip
    p.add_argument(
        "--continuous", action="store_true", help="processing-time trigger instead of availableNow"
    )
    p.add_argument(
        "--timeout", type=float, default=None, help="stop a continuous query after N seconds"
    )
    p.add_argument(
        "--metrics-port", type=_port, default=None, metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (overrides "
        "job.metrics_port; 0: off)",
    )  # fmt: skip
    p.add_argument("--metastore", help="metastore URL (overrides config and environment)")
    p.add_argument("--warehouse", help="warehouse root (overrides config and environment)")
    p.set_defaults(func=_cmd_run_kafka)


def _count(text: str) -> int:
    """A count of events, 0 or more (argparse turns the error into exit 2)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count (0 or more), got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a count (0 or more), got {n}")
    return n


def _port(text: str) -> int:
    """A TCP port, 0..65535 (argparse turns the error into exit 2)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port (0..65535), got {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port (0..65535), got {n}")
    return n


def _cmd_run_kafka(args: argparse.Namespace) -> int:
    from acidstream.jobs.config import KafkaJobConfig

    overrides = {
        "kafka.bootstrap_servers": args.bootstrap, "kafka.topic": args.topic,
        "metastore": args.metastore, "warehouse": args.warehouse,
        "trigger.available_now": False if args.continuous else None,
        "job.metrics_port": args.metrics_port,
        "storage_options": storage_options_of(args),  # over the file's storage_options
    }  # fmt: skip
    config = KafkaJobConfig.load(args.config, overrides=overrides)
    return run(
        config, sample_events=args.sample_events, bad_every=args.bad_every, timeout_s=args.timeout
    )


DEMO_MARKER = ".acidstream-embedded-demo"


def fresh_demo_state(config: Any) -> str | None:
    """Give an embedded-broker run its own fresh state; returns a note to print.

    The embedded broker keeps its log in memory, so each run starts with an empty topic: a
    checkpoint or table of an earlier run points at offsets that no longer exist. The
    warehouse a demo run creates carries a marker, and only such a warehouse is reset; any
    other non-empty warehouse is refused with the fix, never deleted.
    """
    import os
    import shutil

    from acidstream.acid.errors import ConfigError

    wh = config.warehouse
    if "://" in wh:
        raise ConfigError("a remote warehouse's demo state is remote_demo_state's")
    marker = os.path.join(wh, DEMO_MARKER)
    note = None
    if os.path.isdir(wh) and os.listdir(wh):
        if not os.path.exists(marker) or config.metastore:
            raise ConfigError(
                f"the embedded broker starts empty on every run, and {wh} holds tables or a "
                "checkpoint of another run: give a new --warehouse, or remove that directory"
            )
        shutil.rmtree(wh)
        note = f"embedded broker: the demo state in {wh} was reset (the broker starts empty)"
    os.makedirs(wh, exist_ok=True)
    with open(marker, "w") as f:
        f.write("state of an embedded-broker demo run: reset by the next one\n")
    return note


def remote_demo_state(config: Any) -> tuple[Any, str]:
    """An embedded-broker run on a remote warehouse (``s3://...``): the warehouse stays
    there, and the run's local state (the Spark checkpoint, which names offsets of this
    run's broker only) goes to a new temporary directory, removed when the run ends.
    Returns the config with that checkpoint, and the directory.

    The warehouse must hold no table directory of another run (the broker starts empty,
    so a table's recorded offsets would name offsets that no longer exist); it is never
    deleted.

    Raises:
        ConfigError: the warehouse holds anything.
    """
    import dataclasses
    import tempfile

    from acidstream.acid.errors import ConfigError
    from acidstream.txn.config import StoreConfig

    cfg = StoreConfig.resolve(
        metastore=config.metastore,
        warehouse=config.warehouse,
        storage_options=config.storage_options,
    )
    storage, root = cfg.storage()
    if storage.exists(root) and storage.list_dir(root):
        raise ConfigError(
            f"the embedded broker starts empty on every run, and {config.warehouse} holds "
            "tables of another run: give a new --warehouse"
        )
    local = tempfile.mkdtemp(prefix="acidstream-embedded-")
    if "://" in config.checkpoint:  # Spark checkpoints on the local disk here
        config = dataclasses.replace(config, checkpoint=f"{local}/checkpoint")
    return config, local


def run(config: Any, *, sample_events: int | None, bad_every: int, timeout_s: float | None) -> int:
    """Run the job; with the embedded broker, produce sample events first and print a
    per-partition summary read back from the table."""
    import shutil

    from acidstream.jobs.broker import EmbeddedBroker
    from acidstream.jobs.kafka_job import run_kafka_job
    from acidstream.txn.config import is_remote

    timings: list[tuple[str, float]] = []
    broker = None
    local_state: str | None = None  # a remote warehouse's embedded run: its local dir
    try:
        bootstrap = config.kafka.bootstrap_servers
        if config.kafka.embedded and is_remote(config.warehouse):
            config, local_state = remote_demo_state(config)
        elif config.kafka.embedded:
            note = fresh_demo_state(config)
            if note:
                print(note, flush=True)
        if config.kafka.embedded:
            t = time.monotonic()
            broker = EmbeddedBroker().start()
            bootstrap = broker.bootstrap
            broker.create_topic(config.kafka.topic, config.kafka.partitions)
            if config.kafka.end_offsets_from is None:
                # Tansu's ListOffsets(latest) is wrong for multi-record batches; the fetch
                # high watermark is right (acidstream/jobs/broker.py).
                import dataclasses

                config = dataclasses.replace(
                    config, kafka=dataclasses.replace(config.kafka, end_offsets_from="fetch")
                )
            timings.append(("start broker", time.monotonic() - t))
            if sample_events is None:
                sample_events = 100_000
        bad = 0
        expected = sample_events
        if sample_events:
            from kafka import KafkaProducer

            from acidstream.jobs.sample_events import (
                produce_debezium_sample_events,
                produce_sample_events,
            )

            t = time.monotonic()
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
            try:
                if config.sink.format == "debezium":
                    # A change log: the table must end with the keys still alive.
                    bad, expected = produce_debezium_sample_events(
                        producer, config.kafka.topic, sample_events, bad_every=bad_every
                    )
                else:
                    bad = produce_sample_events(
                        producer, config.kafka.topic, sample_events, bad_every=bad_every
                    )
            finally:
                producer.close()
            timings.append(
                (f"produce {sample_events:,} events (+{bad} malformed)", time.monotonic() - t)
            )
        print(f"job: {config.kafka.topic}@{bootstrap} -> {config.table.name}\n"
              f"  warehouse    {config.warehouse}\n  checkpoint   {config.checkpoint}\n"
              f"  dead letters {config.sink.dead_letter_path or '(none: a bad record fails the batch)'}",
              flush=True)  # fmt: skip
        result = run_kafka_job(config, bootstrap=bootstrap, timeout_s=timeout_s)
        timings.append((f"stream job ({result.batches_committed} batches, start: {result.started_from})",
                        result.seconds))  # fmt: skip
    finally:
        if broker is not None:
            broker.stop()
        if local_state is not None:
            shutil.rmtree(local_state, ignore_errors=True)
    _summary(config, result.rows, timings, expected=expected)
    return 0


def _summary(
    config: Any, rows: int, timings: list[tuple[str, float]], *, expected: int | None
) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from acidstream.acid.table_name import TableName
    from acidstream.snapshot_read import scan_location
    from acidstream.txn.config import StoreConfig

    t = time.monotonic()
    store = StoreConfig.resolve(
        metastore=config.metastore,
        warehouse=config.warehouse,
        storage_options=config.storage_options,
    ).open()
    try:
        name = TableName.parse(config.table.name)
        table = store.get_table(name.db, name.table)
        txns = store.get_valid_txns()
        wids = store.get_valid_write_ids(table.db, table.name, txns)
    finally:
        store.close()
    cols = (
        ["id", *table.partition_names]
        if "id" in table.schema.names
        else list(table.partition_names)
    )
    # A run over an empty topic may have written nothing: zero rows, the catalog's columns.
    s = scan_location(
        table.location or "", partition_keys=tuple(table.partition_names), write_ids=wids,
        txns=txns, columns=cols or None, schema=table.schema,
        storage_options=config.storage_options,
    )  # fmt: skip
    tables = list(s.batches)
    data = pa.concat_tables(tables) if tables else s.schema.empty_table()
    timings.append(("read back", time.monotonic() - t))
    print()
    if table.partition_names:
        counts = data.group_by(list(table.partition_names)).aggregate([([], "count_all")])
        print(f"{'partition':<32} {'rows':>12}")
        for r in sorted(
            counts.to_pylist(), key=lambda r: [str(r[k]) for k in table.partition_names]
        ):
            part = "/".join(f"{k}={r[k]}" for k in table.partition_names)
            print(f"{part:<32} {r['count_all']:>12,}")
    print(f"{'total':<32} {data.num_rows:>12,}")
    if "id" in data.column_names:
        distinct = len(pc.unique(data.column("id")))
        print(f"{'distinct ids':<32} {distinct:>12,}")
        if expected is not None:
            verdict = "exactly once" if distinct == data.num_rows == expected else "MISMATCH"
            label = ("keys alive after the changes" if config.sink.mode == "upsert"
                     else "sample events produced")  # fmt: skip
            print(f"{label:<32} {expected:>12,}  ({verdict})")
    print()
    print(f"{'step':<60} {'seconds':>8}")
    for label, secs in timings:
        print(f"{label:<60} {secs:>8.2f}")
    total = sum(s for _, s in timings)
    print(f"{'total':<60} {total:>8.2f}")
    sys.stdout.flush()
