"""What a Spark application's event log says about where its tasks ran.

The cluster tests' drivers run with ``spark.eventLog.enabled``; each ``SparkListenerTaskEnd``
event names the executor's host (the ``--host`` its worker was started with, i.e. the
namespace's address). Reading the log is how a test proves that executors on two hosts did
work, rather than trusting a count of registered executors.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

__all__ = ["SHORT_LIVED_JVM", "driver_conf", "successful_task_hosts"]

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options of the test cluster's JVMs (daemons, drivers, executors)."""


def successful_task_hosts(event_log_dir: Path) -> Counter[str]:
    """The number of successful tasks per executor host over every application whose event
    log is in ``event_log_dir`` (finished or ``.inprogress``)."""
    hosts: Counter[str] = Counter()
    for path in sorted(event_log_dir.rglob("*")):
        if not path.is_file():
            continue
        with open(path, errors="replace") as f:
            for line in f:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                event = json.loads(line)
                reason = event.get("Task End Reason", {}).get("Reason")
                if reason == "Success":
                    hosts[event["Task Info"]["Host"]] += 1
    return hosts


def driver_conf(*, driver_ip: str, work_dir: Path, cores: int = 2) -> dict[str, str]:
    """Spark settings of a client-mode driver on the cluster's host ``driver_ip``.

    Its event log goes to ``work_dir/events`` (read it with :func:`successful_task_hosts`)
    and its scratch space to ``work_dir/local``, both removed with the test's directory.

    The driver binds to and advertises its host's address (executors on other hosts
    connect back to it); it waits until executors with ``cores`` cores in all have
    registered before running anything (else a fast job can finish on the first executor
    alone); every executor gets one core and 512 MiB (each worker offers 1 GiB).
    """
    return {
        "spark.driver.host": driver_ip,
        "spark.driver.bindAddress": driver_ip,
        "spark.driver.memory": "768m",
        "spark.cores.max": str(cores),
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        "spark.locality.wait": "0s",
        # C1 JIT only and the serial collector: these JVMs live for seconds on a busy
        # 2-core machine, where start-up, not peak speed, is what costs.
        "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
        "spark.executor.extraJavaOptions": SHORT_LIVED_JVM,
        "spark.ui.enabled": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{work_dir / 'events'}",
        "spark.local.dir": str(work_dir / "local"),
        # One plain JSON-lines file per application (Spark 4 rolls and compresses by default).
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
    }
