"""txn package."""
