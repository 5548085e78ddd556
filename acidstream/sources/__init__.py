"""sources: PySpark data sources (the Kafka source; the ACID table source)."""
