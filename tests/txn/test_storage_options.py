"""Storage options (``acidstream.txn.storage_options``): parsed from ``k=v`` flags and from every
config file type, merged flags over file, typed, nested, masked when printed, kept whole
when pickled."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from acidstream.acid.errors import ConfigError
from acidstream.ingest.http.config import ServerConfig
from acidstream.jobs.config import KafkaJobConfig
from acidstream.sources.acid_table_options import AcidTableOptions, spark_storage_options
from acidstream.txn.config import StoreConfig
from acidstream.txn.storage_options import MASK, StorageOptions

SECRET = "s3cr3t-value"


def test_pairs_are_typed_nested_and_later_ones_win() -> None:
    o = StorageOptions.from_pairs(
        [
            "endpoint_url=http://127.0.0.1:9000",
            "key=12345",  # an access key of digits stays text
            f"secret={SECRET}",
            "client_kwargs.region_name=eu-west-1",
            "use_ssl=false",
            "max_concurrency=4",
            "default_block_size=5.5",
            "version_aware=True",
            "code=007",  # not how a number is written: text
            "client_kwargs.region_name=us-east-1",
        ]
    )
    assert dict(o) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "12345",
        "secret": SECRET,
        "client_kwargs": {"region_name": "us-east-1"},
        "use_ssl": False,
        "max_concurrency": 4,
        "default_block_size": 5.5,
        "version_aware": True,
        "code": "007",
    }


def test_printing_masks_secret_like_names_at_any_depth() -> None:
    o = StorageOptions(
        {
            "endpoint_url": "http://h:1",
            "key": "AKIA",
            "secret": SECRET,
            "token": SECRET,
            "client_kwargs": {"aws_secret_access_key": SECRET, "region_name": "r"},
            "config_kwargs": {"password": SECRET},
        }
    )
    for text in (repr(o), str(o), f"{o}", repr(StoreConfig(metastore_url="sqlite:///m.db",
                                                           warehouse="s3://b/w",
                                                           storage_options=o))):  # fmt: skip
        assert SECRET not in text and "AKIA" not in text
        assert "http://h:1" in text and "'region_name': 'r'" in text and MASK in text
    assert o.masked()["client_kwargs"]["aws_secret_access_key"] == MASK


def test_options_are_immutable_hashable_and_pickle_whole() -> None:
    o = StorageOptions({"client_kwargs": {"region_name": "r"}, "secret": SECRET})
    o["client_kwargs"]["region_name"] = "changed"  # a copy is handed out
    assert o["client_kwargs"] == {"region_name": "r"}
    back = pickle.loads(pickle.dumps(o))
    assert back == o and hash(back) == hash(o) and back.to_dict()["secret"] == SECRET
    assert o.merged({"client_kwargs": {"x": 1}}).to_dict() == {
        "client_kwargs": {"region_name": "r", "x": 1},
        "secret": SECRET,
    }


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([f"secret:{SECRET}"], "expected NAME=VALUE, got a text without '='"),
        (["=v"], "empty option name"),
        (["a..b=v"], "empty option name"),
    ],
)
def test_bad_pairs_are_config_errors_that_never_echo_a_value(
    pairs: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        StorageOptions.from_pairs(pairs)
    assert SECRET not in str(e.value) and "\n" not in str(e.value)


def test_kafka_job_yaml_storage_options_with_flags_over_them(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "table": {"name": "db.t", "columns": "id bigint"},
                "warehouse": "s3://b/wh",
                "metastore": "sqlite:////tmp/m.db",
                "storage_options": {
                    "endpoint_url": "http://file:1",
                    "secret": SECRET,
                    "client_kwargs": {"region_name": "file-region"},
                },
            }
        )
    )
    cfg = KafkaJobConfig.load(path, env={})
    assert cfg.storage_options["client_kwargs"] == {"region_name": "file-region"}
    over = StorageOptions.from_pairs(["endpoint_url=http://flag:2", "client_kwargs.x=1"])
    cfg = KafkaJobConfig.load(path, env={}, overrides={"storage_options": over})
    assert cfg.storage_options.to_dict() == {
        "endpoint_url": "http://flag:2",
        "secret": SECRET,
        "client_kwargs": {"region_name": "file-region", "x": 1},
    }
    assert SECRET not in repr(cfg)
    # The job's sinks get them (their executor tasks carry them pickled).
    from acidstream.jobs.kafka_job import make_sink

    sink = make_sink(cfg, lineage="l")
    assert sink.config.storage_options == cfg.storage_options
    assert pickle.loads(pickle.dumps(sink)).config.storage_options.to_dict()["secret"] == SECRET


def test_http_server_yaml_storage_options_with_flags_over_them(tmp_path: Path) -> None:
    path = tmp_path / "http.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tables": {"db.t": {"format": "json"}},
                "storage_options": {"endpoint_url": "http://file:1", "key": SECRET},
            }
        )
    )
    cfg = ServerConfig.load(path, env={})
    assert dict(cfg.storage_options) == {"endpoint_url": "http://file:1", "key": SECRET}
    cfg = ServerConfig.load(
        path, env={}, overrides={"storage_options": StorageOptions.from_pairs(["anon=true"])}
    )
    assert dict(cfg.storage_options) == {"endpoint_url": "http://file:1", "key": SECRET,
                                         "anon": True}  # fmt: skip
    assert SECRET not in repr(cfg)
    path.write_text(yaml.safe_dump({"tables": {"db.t": {}}, "storage_options": "k=v"}))
    with pytest.raises(ConfigError, match="storage_options must be a mapping"):
        ServerConfig.load(path, env={})


def test_acidtable_spark_options_round_trip() -> None:
    o = StorageOptions(
        {"endpoint_url": "http://h:1", "use_ssl": False, "client_kwargs": {"region_name": "r"}}
    )
    spark = spark_storage_options(o)
    assert spark == {
        "storage.endpoint_url": "http://h:1",
        "storage.use_ssl": "false",
        "storage.client_kwargs.region_name": "r",
    }
    parsed = AcidTableOptions.parse({"table": "db.t", **spark})
    assert parsed.storage_options == o


def test_a_remote_warehouse_needs_a_metastore_named() -> None:
    with pytest.raises(ConfigError, match="--metastore"):
        StoreConfig.resolve(warehouse="s3://b/w", env={})
    with pytest.raises(ConfigError, match="must be a local file"):
        StoreConfig.resolve(warehouse="s3://b/w", metastore="sqlite:///s3://b/w/m.db", env={})
    local = StoreConfig.resolve(warehouse="/tmp/w", env={})
    assert local.metastore_url == "sqlite:////tmp/w/metastore.db"
    ok = StoreConfig.resolve(warehouse="s3://b/w", metastore="postgresql://h/db", env={})
    assert ok.warehouse == "s3://b/w" and not ok.storage_options


def test_store_config_repr_hides_the_metastore_password() -> None:
    cfg = StoreConfig.resolve(metastore="postgresql://u:hunter2@db:5432/ms", warehouse="/tmp/wh")
    text = repr(cfg)
    assert "hunter2" not in text and "postgresql://u:***@db:5432/ms" in text
    with pytest.raises(ConfigError) as err:
        StoreConfig(metastore_url="mysql://u:hunter2@db/ms", warehouse="/tmp/wh")
    assert "hunter2" not in str(err.value)
