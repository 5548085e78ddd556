"""acid: the Hive ACID on-disk format library (names, codecs, snapshots, ORC writer and reader).

Pure library: it knows nothing of the transaction manager or Spark.
"""
