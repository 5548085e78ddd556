"""The ORC ``Type`` messages of a schema are built once (issue 33: a cheaper small commit).

Every file a writer opens needs them for its footer (a batch-1 commit opens one file per
txn); a schema is immutable, so they are built once per schema and each caller gets
its own list.
"""

from __future__ import annotations

from typing import Any

import pytest

from acidstream.acid import orc_types
from acidstream.acid.orc_types import event_type_messages
from acidstream.acid.schema import TableSchema


def test_type_messages_are_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = "id bigint, name varchar(12), price decimal(10,2), tags array<string>"
    first = event_type_messages(TableSchema.parse(spec))
    calls: list[str] = []
    real = orc_types.parse_hive_type

    def counted(t: str, *a: Any, **kw: Any) -> Any:
        calls.append(t)
        return real(t, *a, **kw)

    monkeypatch.setattr(orc_types, "parse_hive_type", counted)
    again = event_type_messages(TableSchema.parse(spec))  # an equal schema, another object
    assert calls == []
    assert again == first and again is not first
    # Each caller owns its list: changing one changes nothing for the next.
    again.clear()
    assert event_type_messages(TableSchema.parse(spec)) == first
    # Another schema gets its own messages (varchar(13), not the cached varchar(12)).
    other = event_type_messages(TableSchema.parse(spec.replace("12", "13")))
    assert calls and other != first and len(other) == len(first)
