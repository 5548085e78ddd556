"""acidstream.jobs: the application layer's jobs (the Kafka-to-table job and its config),
the embedded broker and the demo's sample events (``docs/sink.md``)."""
