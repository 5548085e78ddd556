"""The ``acidtable`` source through a link: option ``namespace``, ``load('T1@B')``; a static
link's partitions only; the same lease (cleaner protection) as a direct read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from acidstream.compaction.cleaner import Cleaner
from acidstream.compaction.worker import Worker
from acidstream.sources.acid_table import AcidTableSource
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.store import TxnState, open_store
from tests.txn.links_helpers import make_namespaces, write

pytestmark = pytest.mark.spark


@pytest.fixture
def env(store_url: str, tmp_path: Path) -> Any:
    """A metastore (both backends) with namespaces a, b and table b.t1 (ds=1, ds=2)."""
    wh = str(tmp_path / "wh")
    store = open_store(store_url, warehouse=wh)
    make_namespaces(store)
    write(store, [("1", range(0, 3)), ("2", range(10, 13))])
    store.create_link("a", "b", "t1")
    store.alter_link_partition("a", "b", "t1", "ds=1", add=True)
    yield store_url, wh, store
    store.close()


@pytest.fixture(scope="module")
def sp(spark: Any) -> Any:
    spark.dataSource.register(AcidTableSource)
    return spark


def _load(sp: Any, env: Any, name: str, **opts: str) -> Any:
    url, wh, _ = env
    r = sp.read.format("acidtable").option("metastore", url).option("warehouse", wh)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(name)


def test_spark_reads_through_a_static_link_only_its_partitions(sp: Any, env: Any) -> None:
    rows = _load(sp, env, "t1@b", namespace="a").select("id", "ds").collect()
    assert sorted((r.id, r.ds) for r in rows) == [(0, "1"), (1, "1"), (2, "1")]
    assert _load(sp, env, "b.t1").count() == 6  # the owner's direct read sees both
    with pytest.raises(Exception, match="outside namespace a"):
        _load(sp, env, "b.t1", namespace="a").collect()


def test_read_through_a_link_holds_the_same_lease_as_a_direct_read(env: Any) -> None:
    """Planned through the link, the read's lease keeps the Cleaner off its snapshot while
    the owner writes and compacts; once the lease ends the Cleaner proceeds."""
    url, wh, store = env
    t = store.get_table("b", "t1")
    assert t.location is not None
    source = AcidTableSource({"path": "t1@b", "namespace": "a", "metastore": url, "warehouse": wh})
    reader = source.reader(source.schema())  # the planning worker's steps
    parts = reader.partitions()
    part_dir = Path(t.location) / "ds=1"
    old = {p.name for p in part_dir.iterdir() if p.is_dir()}
    write(store, [("1", range(3, 6))])
    q = CompactionQueue(store)
    q.request("b", "t1", "ds=1", major=True)
    out = Worker(store, queue=q).run_once()
    assert out is not None and out.state == "r", out
    cleaner = Cleaner(store, queue=q)
    assert cleaner.run_once() == []  # the link read's lease predates the compaction
    assert old <= {p.name for p in part_dir.iterdir()}
    got = pa.Table.from_batches([b for p in parts for b in reader.read(p)])
    assert sorted(got.column("id").to_pylist()) == [0, 1, 2]
    assert reader.spec.lease is not None
    open_txns = [x.txn_id for x in store.show_txns() if x.state == TxnState.OPEN]
    assert open_txns == [reader.spec.lease.txn_id]
    store.commit_txn(reader.spec.lease.txn_id)
    assert [c.id for c in cleaner.run_once()] == [out.id]
    assert not old & {p.name for p in part_dir.iterdir()}
