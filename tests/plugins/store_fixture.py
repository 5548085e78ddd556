"""Placeholder until the txn store fixture lands."""
