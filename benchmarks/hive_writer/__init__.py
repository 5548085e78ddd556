"""Hive 2.3's own ACID writer as a benchmark peer (Java source + its Python driver)."""
