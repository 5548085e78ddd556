"""Which tests `make test` leaves out and `make test-slow` runs (marker ``long``).

`make test` has to stay near 25 minutes on two cores (the brief); the suite as a whole is
about twice that. What moves out is what repeats a proof that stays in:

- :data:`PG_TWINS`: store-parametrised tests that take five seconds or more (measured in a
  full `-n 2` run, ``--junitxml``): their SQLite case stays in `make test`, their PostgreSQL
  case runs in `make test-slow`. Not listed, so on both backends in `make test`: every faster
  store test (about 700 PostgreSQL cases) and the tests whose point is PostgreSQL's own
  behaviour with many processes: concurrent txns, heartbeats racing commits, processes
  killed mid-commit, two writers' conflicts.
- :data:`LONG_CASES`: single cases, each with what stays.

Names are node ids (a function's id for :data:`PG_TWINS`), so that the test files keep
their plain parametrisations; a listed name that a file collected whole does not have is
an error (``tests/conftest.py``), so a renamed test cannot silently come back.
"""

from __future__ import annotations

PG_TWINS: tuple[str, ...] = (
    "tests/acid/test_mutation_read.py::test_spark_acidtable_source_equals_the_model",
    "tests/acidstream/test_cli_list_bucketing.py::test_errors_through_the_command_have_no_traceback",
    "tests/acidstream/test_cli_mutations.py::test_delete_prints_the_rows_it_removed_and_its_write_id",
    "tests/acidstream/test_cli_mutations.py::test_the_acidstream_executable_deletes_updates_merges_and_fails_with_exit_codes",
    "tests/acidstream/test_cli_mutations.py::test_update_sets_each_column_and_prints_the_rows_changed",
    "tests/acidstream/test_table.py::test_spark_inside_a_snapshot_sees_the_same_rows",
    "tests/chaos/test_upsert_chaos.py::test_kafka_upsert_kill_iteration_keeps_every_invariant",
    "tests/compaction/test_mutation_dirs.py::test_random_mutations_and_compactions_equal_the_model",
    "tests/compaction/test_partitioned_targets.py::test_failed_compaction_is_one_line_and_exit_4",
    "tests/compaction/test_worker.py::test_successive_minor_and_major_compactions_keep_the_rows",
    "tests/http/test_crash.py::test_crash_after_commit_the_retry_is_answered_from_the_commit",
    "tests/http/test_crash.py::test_crash_before_commit_leaves_nothing_visible_and_the_retry_lands_once",
    "tests/http/test_crash.py::test_kill9_under_load_then_restart_every_acked_record_once",
    "tests/http/test_idempotency_expiry.py::test_the_server_expires_keys_after_the_retention",
    "tests/http/test_upserts.py::test_group_commit_never_mixes_changes_into_an_append_txn",
    "tests/ingest/test_connection.py::test_writer_killed_mid_transaction_leaves_only_committed_data",
    "tests/ingest/test_list_bucketing_writes.py::test_http_server_routes_rows_and_rejects_the_default_dir_partition_value",
    "tests/ingest/test_upserts.py::test_upserts_and_deletes_over_txns_equal_the_model",
    "tests/ingest/test_write_many.py::test_write_many_has_the_outcome_of_write_on_each_record",
    "tests/jobs/test_upsert_job.py::test_metrics_endpoint_answers_during_a_processing_time_run",
    "tests/jobs/test_upsert_job.py::test_upsert_job_keeps_the_table_equal_to_the_fold_through_restarts",
    "tests/jobs/test_upsert_job.py::test_upsert_job_killed_mid_run_restarts_without_losing_or_doubling_a_key",
    "tests/mutation/test_changes.py::test_random_change_logs_fold_into_the_table",
    "tests/mutation/test_conflicts.py::test_a_streaming_insert_never_conflicts_with_a_mutation",
    "tests/mutation/test_conflicts.py::test_mutations_of_different_partitions_do_not_conflict",
    "tests/mutation/test_jvm.py::test_jvm_orc_reads_every_mutation_file",
    "tests/mutation/test_model.py::test_random_mutations_equal_the_model",
    "tests/mutation/test_ops_key_lookup.py::test_partition_terms_prune_partitions_and_data_terms_rows",
    "tests/mutation/test_ops_key_lookup.py::test_statement_by_key_equals_the_model",
    "tests/objectstore/test_s3_cli.py::test_every_command_on_an_s3_warehouse_by_storage_options",
    "tests/objectstore/test_s3_http.py::test_the_http_server_writes_to_s3_with_the_options_of_its_config",
    "tests/objectstore/test_s3_killed_writer.py::test_a_writer_killed_mid_stream_leaves_committed_rows_and_a_clean_fsck",
    "tests/objectstore/test_s3_spark.py::test_the_sink_writes_and_the_acidtable_source_reads_on_s3",
    "tests/recovery/test_fsck.py::test_aborted_write_id_directory_is_reported",
    "tests/recovery/test_fsck.py::test_clean_table_is_clean",
    "tests/recovery/test_housekeeper.py::test_killed_writer_txn_is_aborted_and_unlocked_within_timeout_plus_interval",
    "tests/recovery/test_reaping.py::test_healthy_writer_idle_in_an_open_txn_is_never_aborted",
    "tests/recovery/test_reaping.py::test_killed_default_writer_is_reaped_by_default_housekeeping_after_the_metastores_timeout",
    "tests/recovery/test_repair.py::test_killed_streaming_writer_is_recovered",
    "tests/recovery/test_repair_side_files.py::test_a_dead_writers_file_in_a_wholly_aborted_directory_is_no_side_file_error",
    "tests/recovery/test_repair_side_files.py::test_damaged_side_file_of_a_dead_writer_keeps_every_committed_row",
    "tests/recovery/test_repair_side_files.py::test_dry_run_lists_exactly_what_apply_does_for_every_finding_kind",
    "tests/recovery/test_repair_side_files.py::test_empty_side_file_dry_run_shows_the_cut_and_no_removal",
    "tests/recovery/test_repair_side_files.py::test_footer_past_the_side_file_holding_aborted_rows_only_is_cut_off",
    "tests/recovery/test_repair_side_files.py::test_never_flushed_file_is_quarantined_not_deleted",
    "tests/sinks/test_foreach_batch.py::test_a_failed_batch_waits_for_its_other_tasks_before_deleting",
    "tests/sinks/test_foreach_batch.py::test_a_failed_transaction_batch_aborts_every_txn_and_deletes_its_files",
    "tests/sinks/test_foreach_batch.py::test_an_unknown_outcome_the_metastore_cannot_settle_deletes_nothing",
    "tests/sinks/test_foreach_batch.py::test_bad_record_fails_the_batch_and_leaves_nothing_visible",
    "tests/sinks/test_foreach_batch.py::test_each_task_file_is_a_streaming_file_of_the_transaction_batch",
    "tests/sinks/test_spark_merge.py::test_spark_merge_equals_the_python_engine_file_for_file",
    "tests/sinks/test_upsert_sink.py::test_a_failure_before_the_commit_leaves_the_table_at_the_last_batch",
    "tests/sinks/test_upsert_sink.py::test_a_tombstone_alone_deletes_its_key_also_under_the_ordering_guard",
    "tests/sinks/test_upsert_sink.py::test_ordering_guard_skips_and_counts_late_events",
    "tests/sinks/test_upsert_sink.py::test_the_table_equals_the_fold_of_a_random_change_log_and_replays_are_skipped",
    "tests/sinks/test_upsert_sink.py::test_without_a_dead_letter_path_a_bad_event_fails_the_batch_and_commits_nothing",
    "tests/sources/test_acid_table.py::test_pushed_filters_prune_partitions_and_rows",
    "tests/sources/test_acid_table.py::test_reads_the_python_readers_rows_with_typed_partitions_and_row_ids",
    "tests/sources/test_acid_table.py::test_spark_reads_are_snapshots_while_a_writer_commits",
    "tests/sources/test_acid_table.py::test_table_to_table_stream_exactly_once_across_a_driver_kill",
    "tests/sources/test_acid_table.py::test_time_travel_before_and_after_compaction",
    "tests/sources/test_acid_table.py::test_unknown_options_and_columns_are_refused",
    "tests/sources/test_acid_table_list_bucketing.py::test_pushed_filters_skip_list_bucketing_dirs",
    "tests/txn/test_locations.py::test_locations_resolved_once_name_the_same_tree_from_every_cwd",
    "tests/txn/test_names.py::test_every_accepted_name_round_trips_create_ingest_read",
    "tests/txn/test_settings.py::test_cli_config_set_and_get_round_trip",
)  # fmt: skip
"""Functions whose PostgreSQL cases are ``long`` (their SQLite cases stay)."""

_KAFKA_PYTHON = "the confluent-kafka case of the same test stays (one source, two clients: kafka-python's cases under 5 s stay too)"
_DRIVER_KILL = (
    "sink.after_files stays; the chaos tier kills the Kafka job's driver at every sink step"
)

LONG_CASES: dict[str, str] = {
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[mutation-kill-60009-postgres]":
        "mutation-kill-60008-sqlite stays (the slowest fast-tier case: ~1.7x the sqlite one)",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[http-server-kill-801-sqlite]":
        "http-server-kill-802-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-batchN-kill-202-sqlite]":
        "connection-batchN-kill-201-sqlite stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-batchN-kill-205-postgres]":
        "connection-batchN-kill-204-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-storage-fault-602-sqlite]":
        "connection-storage-fault-601-sqlite stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[compactor-kill-702-sqlite]":
        "compactor-kill-701-sqlite stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-pg-terminate-502-postgres]":
        "connection-pg-terminate-501-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-pg-terminate-503-postgres]":
        "connection-pg-terminate-501-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-clock-jump-5-postgres]":
        "connection-clock-jump-4-sqlite stays",
    "tests/sinks/test_kafka_to_table.py::test_driver_killed_at_each_step_loses_and_duplicates_nothing[sink.after_open]": _DRIVER_KILL,
    "tests/sinks/test_kafka_to_table.py::test_driver_killed_at_each_step_loses_and_duplicates_nothing[sink.during_heartbeat]": _DRIVER_KILL,
    "tests/sinks/test_kafka_to_table.py::test_driver_killed_at_each_step_loses_and_duplicates_nothing[sink.after_commit]": _DRIVER_KILL,
    "tests/cluster/test_kafka_job.py::test_kafka_job_on_two_workers_writes_every_event_once_to_s3":
        "tests/cluster/test_smoke.py (Spark tasks on both worker hosts) and test_http_compaction.py stay",
    "tests/sources/test_kafka.py::test_every_event_is_read_exactly_once[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_fetch_end_offsets_read_all_of_a_batched_produce[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_json_starting_offset_past_the_end_is_data_loss[kafka-python-false]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_json_starting_offset_past_the_end_is_data_loss[kafka-python-true]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_json_starting_offsets_must_name_every_partition[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_json_starting_offsets_per_partition[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_latest_reads_only_records_produced_after_the_start[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_max_offsets_per_trigger_splits_into_micro_batches[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_newly_subscribed_topic_partitions_start_from_the_beginning[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_partition_added_to_topic_mid_stream_is_picked_up[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_recreated_topic_is_data_loss[kafka-python-false]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_recreated_topic_is_data_loss[kafka-python-true]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_restart_from_checkpoint_continues_without_loss_or_duplicates[kafka-python]": _KAFKA_PYTHON,
    "tests/sources/test_kafka.py::test_unknown_topic_is_a_clear_source_error[kafka-python]": _KAFKA_PYTHON,
}  # fmt: skip
"""Single cases that are ``long``, each with what stays in `make test`."""


def is_pg_twin(nodeid: str) -> bool:
    """Whether ``nodeid`` is the PostgreSQL case of a :data:`PG_TWINS` function."""
    func, _, params = nodeid.partition("[")
    return func in _PG_TWINS and "postgres" in params.rstrip("]").split("-")


_PG_TWINS = frozenset(PG_TWINS)
