"""Settings parsed once (issue 29, item 5): the HTTP server's config, the Kafka job's config
and the sink's Spark options go through one loader and one typed-field parser
(``acidstream.acid.config_fields``), and every entry point builds its record writer with
one factory (``acidstream.ingest.record_writers.record_writer_for``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.cli.main import main
from acidstream.ingest.http.config import DEFAULT_CONTENT_TYPES, ServerConfig, TableSettings
from acidstream.ingest.http.config import record_writer as http_record_writer
from acidstream.ingest.record_raw import RawWriter
from acidstream.ingest.record_writers import (
    StrictDelimitedInputWriter,
    StrictJsonWriter,
    StrictRegexWriter,
)
from acidstream.jobs.config import KafkaJobConfig
from acidstream.sinks.foreach_batch import SinkOptions, _record_writer

JOB_YAML = "table:\n  columns: 'id bigint'\n"


def _yaml(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _http(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> ServerConfig:
    return ServerConfig.load(_yaml(tmp_path, text), env=env or {})


def _job(tmp_path: Path, text: str = "", **load: Any) -> KafkaJobConfig:
    return KafkaJobConfig.load(_yaml(tmp_path, JOB_YAML + text), env=load.pop("env", {}), **load)


# ------------------------------------------------------------------ one boolean rule


@pytest.mark.parametrize(
    ("word", "value"), [("on", True), ("OFF", False), ("Yes", True), ("0", False)]
)
def test_the_three_configs_read_a_boolean_word_alike(
    tmp_path: Path, word: str, value: bool
) -> None:
    """Before, the sink took only 1/true/yes (``on`` was False) and the HTTP config only
    YAML booleans; now the eight words mean the same everywhere."""
    assert SinkOptions.from_options({"skipBadRecords": word}).skip_bad_records is value
    cfg = _http(tmp_path, f"tables: {{db.t: {{all_or_nothing: '{word}'}}}}\n")
    assert cfg.tables["db.t"].all_or_nothing is value
    job = _job(tmp_path, f"kafka: {{fail_on_data_loss: '{word}'}}\n")
    assert job.kafka.fail_on_data_loss is value


def test_a_misspelt_boolean_sink_option_is_refused_not_false() -> None:
    """The issue's case: ``skipBadRecords=ture`` silently meant False."""
    with pytest.raises(ConfigError) as e:
        SinkOptions.from_options({"skipBadRecords": "ture"})
    assert str(e.value) == (
        "skipBadRecords must be true or false (or 1/0, yes/no, on/off), got 'ture' (sink option)"
    )


def test_a_misspelt_boolean_names_its_source_in_every_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "tables: {db.t: {all_or_nothing: ture}}\n")
    assert str(e.value) == (
        "tables.db.t.all_or_nothing must be true or false (or 1/0, yes/no, on/off), "
        f"got 'ture' (config file {path})"
    )
    with pytest.raises(ConfigError) as e:
        _job(tmp_path, overrides={"kafka.fail_on_data_loss": "ture"})
    assert str(e.value).endswith("got 'ture' (override kafka.fail_on_data_loss)")
    assert str(e.value).startswith("kafka.fail_on_data_loss must be true or false")


# ------------------------------------------------------------------ numbers and sources


def test_an_environment_variable_is_named_when_its_value_is_bad(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "tables: {db.t: {}}\n", env={"ACIDSTREAM_HTTP_PORT": "80x"})
    assert str(e.value) == (
        "listen.port must be an integer, got '80x' (environment variable ACIDSTREAM_HTTP_PORT)"
    )
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "tables: {db.t: {}}\n", env={"ACIDSTREAM_HTTP_PORT": "70000"})
    assert str(e.value) == (
        "listen.port must be 0..65535, got 70000 (environment variable ACIDSTREAM_HTTP_PORT)"
    )


def test_a_flag_is_named_when_its_value_is_bad(tmp_path: Path) -> None:
    text = "tables: {db.t: {}}\n"
    with pytest.raises(ConfigError, match=r"got 'x' \(flag --port\)$"):
        ServerConfig.load(_yaml(tmp_path, text), env={}, overrides={"port": "x"})
    with pytest.raises(
        ConfigError, match=r"^kafka\.topic must be a string, got \['a'\] \(flag --topic\)$"
    ):
        _job(tmp_path, overrides={"kafka.topic": ["a"]})


def test_a_fractional_integer_is_refused_not_truncated(tmp_path: Path) -> None:
    """The HTTP loader turned ``max_record_bytes: 1.5`` into 1 (``int(1.5)``)."""
    with pytest.raises(
        ConfigError, match=r"^tables\.db\.t\.max_record_bytes must be an integer, got 1\.5"
    ):
        _http(tmp_path, "tables: {db.t: {max_record_bytes: 1.5}}\n")
    with pytest.raises(ConfigError, match=r"^kafka\.partitions must be an integer, got 2\.5"):
        _job(tmp_path, "kafka: {partitions: 2.5}\n")
    with pytest.raises(ConfigError, match=r"^txnsPerBatch must be an integer, got '2\.5'"):
        SinkOptions.from_options({"txnsPerBatch": "2.5"})


# ------------------------------------------------------------------ unknown keys


def test_unknown_keys_get_close_matches_in_every_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "tables: {db.t: {formt: json}}\n")
    assert str(e.value) == (
        f"unknown config key tables.db.t.formt (config file {path}); "
        "did you mean tables.db.t.format?"
    )
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "limits: {max_body_byte: 1}\ntables: {db.t: {}}\n")
    assert "; did you mean limits.max_body_bytes or " in str(e.value)
    with pytest.raises(ConfigError) as e:
        _job(tmp_path, "kafka: {topc: t}\n")
    assert str(e.value) == (
        f"unknown config key kafka.topc (config file {path}); did you mean kafka.topic?"
    )
    with pytest.raises(ConfigError) as e:
        _job(tmp_path, "housekeping_interval_s: 5\n")
    assert "did you mean housekeeping_interval_s?" in str(e.value)
    with pytest.raises(ConfigError) as e:
        SinkOptions.from_options({"skipBadRecord": "true"})
    assert str(e.value) == (
        "unknown sink option skipBadRecord (sink option); did you mean skipBadRecords?"
    )


# ------------------------------------------------------------------ stricter rules kept


def test_choices_match_exactly(tmp_path: Path) -> None:
    """Where the loaders disagreed (the job lower-cased ``compaction``, the HTTP server
    ``log_level``; the HTTP ``format`` matched exactly), the exact match is kept."""
    with pytest.raises(ConfigError, match=r"^compaction must be one of auto, off, got 'AUTO'"):
        _job(tmp_path, "compaction: AUTO\n")
    with pytest.raises(ConfigError, match=r"^log_level must be one of critical, error"):
        _http(tmp_path, "log_level: INFO\ntables: {db.t: {}}\n")
    with pytest.raises(ConfigError, match=r"^format must be one of json, delimited, regex, raw"):
        SinkOptions.from_options({"format": "JSON"})


def test_a_boolean_is_not_a_string(tmp_path: Path) -> None:
    """``format: yes`` (YAML's True) was the string ``'True'`` in the job's config."""
    with pytest.raises(ConfigError, match=r"^table\.partitioned_by must be a string, got True"):
        _job(tmp_path, "table: {columns: 'id int', partitioned_by: yes}\n")


# ------------------------------------------------------------------ the removed timeout

MOVED = "txn_timeout_s is a metastore setting now: acidstream config set txn_timeout_s N"


def test_the_removed_txn_timeout_is_refused_by_every_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with pytest.raises(ConfigError) as e:
        _http(tmp_path, "txn_timeout_s: 300\ntables: {db.t: {}}\n")
    assert str(e.value) == f"txn_timeout_s (config file {path}): {MOVED}"
    with pytest.raises(ConfigError) as e:
        _job(tmp_path, "sink: {txn_timeout_s: 300}\n")
    assert str(e.value) == f"sink.txn_timeout_s (config file {path}): {MOVED}"
    with pytest.raises(ConfigError) as e:
        SinkOptions.from_options({"TXNTIMEOUT": "300"})
    assert str(e.value) == f"TXNTIMEOUT (sink option): {MOVED}"
    with pytest.raises(TypeError):
        SinkOptions(txn_timeout_s=300)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ServerConfig(txn_timeout_s=300)  # type: ignore[call-arg]


# ------------------------------------------------------------------ one writer factory


def test_one_factory_builds_every_format() -> None:
    from acidstream.ingest.record_writers import RECORD_FORMATS, record_writer_for

    assert RECORD_FORMATS == ("json", "delimited", "regex", "raw")
    json_w = record_writer_for("json", max_record_bytes=10)
    assert isinstance(json_w, StrictJsonWriter) and json_w.max_record_bytes == 10
    delim = record_writer_for("delimited")
    assert isinstance(delim, StrictDelimitedInputWriter) and delim.field_delimiter == "\x01"
    assert record_writer_for("delimited", delimiter="|").field_delimiter == "|"  # type: ignore[attr-defined]
    regex = record_writer_for("regex", regex="(.*)")
    assert isinstance(regex, StrictRegexWriter) and regex.regex == "(.*)"
    raw = record_writer_for("raw", max_record_bytes=7)
    assert isinstance(raw, RawWriter) and raw.max_record_bytes == 7
    with pytest.raises(
        ConfigError, match=r"^format must be one of json, delimited, regex, raw, got 'xml'$"
    ):
        record_writer_for("xml")


@pytest.mark.parametrize("regex", [None, ""])
def test_a_missing_regex_is_a_config_error_everywhere(tmp_path: Path, regex: str | None) -> None:
    from acidstream.ingest.record_writers import record_writer_for

    with pytest.raises(ConfigError, match=r"^format regex needs regex$"):
        record_writer_for("regex", regex=regex)
    with pytest.raises(ConfigError, match=r"^format regex needs the regex option$"):
        SinkOptions(format="regex", regex=regex)
    with pytest.raises(ConfigError, match=r"^format regex needs the regex option$"):
        SinkOptions.from_options({"format": "regex", **({} if regex is None else {"regex": ""})})
    with pytest.raises(
        ConfigError, match=r"^tables\.db\.t\.format regex needs tables\.db\.t\.regex$"
    ):
        TableSettings(name="db.t", format="regex", regex=regex)
    with pytest.raises(ConfigError, match=r"^format regex needs the regex option$"):
        _job(tmp_path, "sink: {format: regex}\n")


def test_a_sink_regex_that_does_not_compile_is_refused_on_the_driver() -> None:
    """Before, the sink's options took it and every executor task failed on it."""
    with pytest.raises(ConfigError, match=r"bad regex '\(\('"):
        SinkOptions.from_options({"format": "regex", "regex": "(("})


def test_the_sink_tasks_and_the_http_server_use_the_same_writers() -> None:
    from acidstream.ingest.record_writers import record_writer_for

    opts = SinkOptions.from_options({"format": "delimited", "delimiter": "|"})
    task = _record_writer(opts)
    assert task == record_writer_for("delimited", delimiter="|")
    assert _record_writer(SinkOptions(format="raw")) == RawWriter()
    t = TableSettings(name="db.t", format="regex", regex="(.*)", max_record_bytes=99)
    assert http_record_writer(t) == record_writer_for("regex", regex="(.*)", max_record_bytes=99)


def test_raw_format_in_the_http_config(tmp_path: Path) -> None:
    """``raw`` was the sink's only; the HTTP server takes it now (one string column)."""
    cfg = _http(tmp_path, "tables: {db.t: {format: raw, max_record_bytes: 64}}\n")
    t = cfg.tables["db.t"]
    assert t.content_types == DEFAULT_CONTENT_TYPES["raw"]
    assert http_record_writer(t) == RawWriter(max_record_bytes=64)


def test_raw_format_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    assert main(["create-table", "t", "line string"]) == 0
    lines = ["plain text", '{"not": "parsed"}', "ünïcode, with a comma"]
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{x}\n" for x in lines))
    assert main(["ingest", "t", "--format", "raw", str(src)]) == 0
    capsys.readouterr()
    assert main(["read", "t"]) == 0
    got = [json.loads(x)["line"] for x in capsys.readouterr().out.splitlines()]
    assert sorted(got) == sorted(lines)


def test_cli_regex_without_regex_names_the_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACIDSTREAM_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("ACIDSTREAM_METASTORE", raising=False)
    assert main(["create-table", "t", "line string"]) == 0
    src = tmp_path / "in.txt"
    src.write_text("x\n")
    capsys.readouterr()
    assert main(["ingest", "t", "--format", "regex", str(src)]) == 1
    assert capsys.readouterr().err.strip() == "acidstream: error: --format regex needs --regex"
