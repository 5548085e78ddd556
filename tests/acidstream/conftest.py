"""Fixtures of the facade tests: tables as the ingest tests make them."""

from tests.ingest.conftest import make_table

__all__ = ["make_table"]
