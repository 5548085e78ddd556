"""``ServerConfig.load``: YAML < environment < arguments; unknown keys and bad values are
ConfigErrors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.ingest.http.config import DEFAULT_CONTENT_TYPES, ServerConfig

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_shipped_config_loads() -> None:
    cfg = ServerConfig.load(ROOT / "configs" / "http_ingest.yaml", env={})
    assert cfg.port == 8080 and "default.events" in cfg.tables
    t = cfg.tables["default.events"]
    assert t.format == "json" and t.content_types == DEFAULT_CONTENT_TYPES["json"]
    assert cfg.flume.default_table == "default.events"


def test_arguments_beat_environment_beat_file(tmp_path: Path) -> None:
    p = _write(
        tmp_path, "listen: {host: 0.0.0.0, port: 1000}\nwarehouse: /from/file\ntables: {db.t: {}}\n"
    )
    env = {"ACIDSTREAM_HTTP_PORT": "2000", "ACIDSTREAM_WAREHOUSE": "/from/env"}
    cfg = ServerConfig.load(p, env=env)
    assert (cfg.host, cfg.port, cfg.warehouse) == ("0.0.0.0", 2000, "/from/env")
    cfg = ServerConfig.load(p, env=env, overrides={"port": 0, "warehouse": "/from/args"})
    assert (cfg.port, cfg.warehouse) == (0, "/from/args")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("lisen: {port: 1}\n", "lisen"),
        ("limits: {max_body: 1}\n", "limits.max_body"),
        ("commit: {max_delay_ms: -1}\n", "commit.max_delay_ms"),
        ("tables: {db.t: {formt: json}}\n", "tables.db.t.formt"),
        ("tables: {db.t: {format: xml}}\n", "tables.db.t.format"),
        ("tables: {db.t: {format: regex}}\n", "tables.db.t.regex"),
        ("tables: {db.t: {tokens: abc}}\n", "tables.db.t.tokens"),
        ("tables: {db.t: {all_or_nothing: maybe}}\n", "tables.db.t.all_or_nothing"),
        ("limits: {max_body_bytes: lots}\n", "limits.max_body_bytes"),
        ("flume: {default_table: db.nope}\n", "flume.default_table"),
        ("listen: {port: 70000}\n", "listen.port"),
        ("tables: {db.t: {format: regex, regex: '(('}}\n", "tables.db.t.regex"),
        ("tables: {db.t: {format: delimited, delimiter: ab}}\n", "tables.db.t.delimiter"),
        ("tables: {db.t: {format: delimited, delimiter: '\\x02'}}\n", "tables.db.t.delimiter"),
        ("limits: {max_header_bytes: 0}\ntables: {db.t: {}}\n", "limits.max_header_bytes"),
        ("limits: {header_timeout_s: soon}\ntables: {db.t: {}}\n", "limits.header_timeout_s"),
    ],
)
def test_bad_keys_and_values_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ServerConfig.load(_write(tmp_path, text), env={})


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        ServerConfig.load(tmp_path / "nope.yaml", env={})


def test_a_config_without_tables_is_refused(tmp_path: Path) -> None:
    """A server with no table could only answer 404: refused at load."""
    for text in ("", "tables: {}\n", "listen: {port: 0}\n"):
        with pytest.raises(ConfigError, match="no tables configured"):
            ServerConfig.load(_write(tmp_path, text), env={})
