"""recovery: crash recovery of tables and streaming files (fsck, repair, sink state).

The housekeeper (timed-out txns, history pruning) lives in ``acidstream.txn.housekeeper``
(``docs/housekeeping.md``)."""
