"""Making a commit's footers durable: the files' ``fdatasync``s, then their side files.

Split from :mod:`acidstream.ingest.connection` (caller side: the connection's writing
thread). At a txn boundary of a multi-txn batch each file gets an intermediate footer
(:meth:`acidstream.acid.table_writer.TableWriter.write_footers`); before the commit's
metastore transaction commits, the data must be durable and only then may each side
file name the new length. :class:`FooterSyncer` starts the syncs (on its thread, or on
the caller's), :class:`PendingFooters` records the lengths once they are done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from acidstream.acid.file_writer import AcidFileWriter, record_footers, sync_data_of

__all__ = ["FooterSyncer", "PendingFooters"]


@dataclass(slots=True)
class PendingFooters:
    """A commit's files being made durable: their ``fdatasync``s (:meth:`FooterSyncer.start`),
    then the footers to record in the side files (once, by the writing thread)."""

    data: Future[None]
    footers: Sequence[tuple[AcidFileWriter, int]]
    recorded: bool = False
    #: Final footers (the batch's last txn): run instead of recording footers, once the
    #: files are durable (``TableWriter.finish_ended``: closed, side files deleted).
    finish: Callable[[], None] | None = None

    def record(self) -> None:
        """Wait for the files' sync, then record each new footer in its side file (or,
        final footers, finish the files), once. A storage failure raises its ``OSError``."""
        self.data.result()
        if not self.recorded:
            self.recorded = True
            if self.finish is not None:
                self.finish()
            else:
                record_footers(self.footers)  # the side files, synced together

    def wait(self) -> None:
        """Wait until the sync ended, however it ended (the files are the writer's again)."""
        futures.wait([self.data])


class FooterSyncer:
    """Starts the data ``fdatasync``s of a commit's files (one thread, made on first use)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def start(
        self,
        footers: Sequence[tuple[AcidFileWriter, int]],
        *,
        inline: bool,
        finish: Callable[[], None] | None = None,
    ) -> PendingFooters:
        """Start the syncs of the files of ``footers`` (file, new length).

        A metastore server (PostgreSQL) runs the commit's statements while the sync thread
        waits for the disk. The embedded SQLite metastore (``inline``) runs them in
        microseconds, so the writing thread syncs the files itself before the commit
        begins: handing the work to a thread and back cost more than the overlap saved
        (the waking thread contends for the interpreter lock with a parse running ahead),
        and the database's write lock is not held across the wait. ``finish``: see
        :meth:`start_final`.
        """
        files = [w for w, _ in footers]
        if inline:
            done: Future[None] = Future()
            try:
                _sync_data(files)
            except OSError as e:  # raised where the commit waits for it (``record``)
                done.set_exception(e)
            else:
                done.set_result(None)
            return PendingFooters(done, footers, finish=finish)
        return PendingFooters(self._submit(files), footers, finish=finish)

    def start_final(
        self, files: Sequence[AcidFileWriter], finish: Callable[[], None]
    ) -> PendingFooters:
        """Start the syncs of the batch's last txn's files, their final footers written,
        on the sync thread whatever the metastore: the commit's statements run while the
        disk syncs them (a 1,000-row commit at batch 1 waits for the disk twice, for its
        file and for the metastore's commit: this hides the statements in the first
        wait). ``finish`` runs on the writing thread once they are durable (``record``),
        before the commit's ``COMMIT``.

        Their bytes are handed to the OS here, on the writing thread: a writer killed
        before the sync thread ran leaves whole files, as the inline sync did."""
        if not files or not files[0].sync:
            # Nothing to wait for (no file, or durability flush: the bytes go to the OS
            # only): no thread to hand it to.
            return self.start([(w, 0) for w in files], inline=True, finish=finish)
        handles = [h for w in files for h in w.sync_handles()]
        for h in handles:
            h.flush()
        return PendingFooters(self._submit(files), [], finish=finish)

    def _submit(self, files: Sequence[AcidFileWriter]) -> Future[None]:
        """The files' syncs, on the sync thread (made on first use)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="acidstream-sync")
        return self._pool.submit(_sync_data, files)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _sync_data(files: Sequence[AcidFileWriter]) -> None:
    """Make every file durable up to its new footer, the files together (the sync thread
    or the writing thread; the writing thread waits for it before recording the footers
    and committing)."""
    sync_data_of(files)
