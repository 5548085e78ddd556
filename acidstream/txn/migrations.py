"""Versioned DDL of the metastore schema, shared by SQLite and PostgreSQL.

The transaction tables follow Hive's ``hive-schema-4.1.0.postgres.sql`` (spec
§6.1), keeping Hive's table and column names so anyone who knows the
metastore can read them. The catalog tables are simpler than Hive's (keyed by
``(db, table)`` instead of surrogate ids). Only types both databases accept
are used (``BIGINT``, ``INTEGER``, ``TEXT``, ``CHAR(1)``).

A migration is a list of statements applied in one database transaction;
``SCHEMA_VERSION`` records the highest applied version. Never edit a released
migration: append a new one.
"""

from __future__ import annotations

from acidstream.acid.errors import ConfigError
from acidstream.txn.db import Database, Tx

__all__ = ["MIGRATIONS", "READABLE_FROM_VERSION", "SCHEMA_VERSION", "check_schema", "migrate"]

_V1 = [
    # -- transactions --------------------------------------------------------------------------
    # Hive <= 3's id counter. A row lock on it serialises openers until they commit, so
    # txn ids become visible in id order (the read snapshot's hwm relies on that).
    "CREATE TABLE NEXT_TXN_ID (NTXN_NEXT BIGINT NOT NULL)",
    "INSERT INTO NEXT_TXN_ID (NTXN_NEXT) VALUES (1)",
    # Hive 4's commit mutex: taken by commits that carry update/delete components.
    "CREATE TABLE TXN_LOCK_TBL (TXN_LOCK BIGINT NOT NULL)",
    "INSERT INTO TXN_LOCK_TBL (TXN_LOCK) VALUES (1)",
    """CREATE TABLE TXNS (
        TXN_ID BIGINT PRIMARY KEY,
        TXN_STATE CHAR(1) NOT NULL,
        TXN_STARTED BIGINT NOT NULL,
        TXN_LAST_HEARTBEAT BIGINT NOT NULL,
        TXN_USER TEXT NOT NULL,
        TXN_HOST TEXT NOT NULL,
        TXN_AGENT_INFO TEXT,
        TXN_META_INFO TEXT,
        TXN_HEARTBEAT_COUNT INTEGER NOT NULL DEFAULT 0,
        TXN_TYPE INTEGER NOT NULL DEFAULT 0,
        TXN_ABORT_REASON TEXT,
        TXN_FINISHED BIGINT
    )""",
    "INSERT INTO TXNS (TXN_ID, TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, TXN_HOST) "
    "VALUES (0, 'c', 0, 0, '', '')",
    "CREATE INDEX TXNS_STATE_IDX ON TXNS (TXN_STATE, TXN_ID)",
    """CREATE TABLE TXN_COMPONENTS (
        TC_TXNID BIGINT NOT NULL,
        TC_DATABASE TEXT NOT NULL,
        TC_TABLE TEXT,
        TC_PARTITION TEXT,
        TC_OPERATION_TYPE CHAR(1) NOT NULL,
        TC_WRITEID BIGINT
    )""",
    "CREATE INDEX TC_TXNID_INDEX ON TXN_COMPONENTS (TC_TXNID)",
    """CREATE TABLE COMPLETED_TXN_COMPONENTS (
        CTC_TXNID BIGINT NOT NULL,
        CTC_DATABASE TEXT NOT NULL,
        CTC_TABLE TEXT,
        CTC_PARTITION TEXT,
        CTC_TIMESTAMP BIGINT NOT NULL,
        CTC_WRITEID BIGINT,
        CTC_UPDATE_DELETE CHAR(1) NOT NULL
    )""",
    "CREATE INDEX COMPLETED_TXN_COMPONENTS_IDX "
    "ON COMPLETED_TXN_COMPONENTS (CTC_DATABASE, CTC_TABLE, CTC_PARTITION)",
    """CREATE TABLE NEXT_WRITE_ID (
        NWI_DATABASE TEXT NOT NULL,
        NWI_TABLE TEXT NOT NULL,
        NWI_NEXT BIGINT NOT NULL,
        PRIMARY KEY (NWI_DATABASE, NWI_TABLE)
    )""",
    """CREATE TABLE TXN_TO_WRITE_ID (
        T2W_TXNID BIGINT NOT NULL,
        T2W_DATABASE TEXT NOT NULL,
        T2W_TABLE TEXT NOT NULL,
        T2W_WRITEID BIGINT NOT NULL,
        PRIMARY KEY (T2W_TXNID, T2W_DATABASE, T2W_TABLE)
    )""",
    "CREATE UNIQUE INDEX TBL_TO_TXN_ID_IDX ON TXN_TO_WRITE_ID (T2W_DATABASE, T2W_TABLE, T2W_TXNID)",
    "CREATE UNIQUE INDEX TBL_TO_WRITE_ID_IDX "
    "ON TXN_TO_WRITE_ID (T2W_DATABASE, T2W_TABLE, T2W_WRITEID)",
    """CREATE TABLE WRITE_SET (
        WS_DATABASE TEXT NOT NULL,
        WS_TABLE TEXT NOT NULL,
        WS_PARTITION TEXT,
        WS_TXNID BIGINT NOT NULL,
        WS_COMMIT_ID BIGINT NOT NULL,
        WS_OPERATION_TYPE CHAR(1) NOT NULL
    )""",
    "CREATE INDEX WRITE_SET_IDX ON WRITE_SET (WS_DATABASE, WS_TABLE, WS_COMMIT_ID)",
    # -- locks -----------------------------------------------------------------------------------
    # Its row lock also serialises lock creation and checkLock (FIFO by ext id).
    "CREATE TABLE NEXT_LOCK_ID (NL_NEXT BIGINT NOT NULL)",
    "INSERT INTO NEXT_LOCK_ID (NL_NEXT) VALUES (1)",
    """CREATE TABLE HIVE_LOCKS (
        HL_LOCK_EXT_ID BIGINT NOT NULL,
        HL_LOCK_INT_ID BIGINT NOT NULL,
        HL_TXNID BIGINT NOT NULL DEFAULT 0,
        HL_DB TEXT NOT NULL,
        HL_TABLE TEXT,
        HL_PARTITION TEXT,
        HL_LOCK_STATE CHAR(1) NOT NULL,
        HL_LOCK_TYPE CHAR(1) NOT NULL,
        HL_LAST_HEARTBEAT BIGINT NOT NULL,
        HL_ACQUIRED_AT BIGINT,
        HL_USER TEXT NOT NULL,
        HL_HOST TEXT NOT NULL,
        HL_HEARTBEAT_COUNT INTEGER,
        HL_AGENT_INFO TEXT,
        HL_BLOCKEDBY_EXT_ID BIGINT,
        HL_BLOCKEDBY_INT_ID BIGINT,
        PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID)
    )""",
    "CREATE INDEX HL_TXNID_INDEX ON HIVE_LOCKS (HL_TXNID)",
    "CREATE INDEX HL_DB_INDEX ON HIVE_LOCKS (HL_DB, HL_LOCK_EXT_ID)",
    # -- compaction (minimal until the compactor lands) ------------------------------------------
    "CREATE TABLE NEXT_COMPACTION_QUEUE_ID (NCQ_NEXT BIGINT NOT NULL)",
    "INSERT INTO NEXT_COMPACTION_QUEUE_ID (NCQ_NEXT) VALUES (1)",
    *[
        f"""CREATE TABLE {table} (
        {p}_ID BIGINT PRIMARY KEY,
        {p}_DATABASE TEXT NOT NULL,
        {p}_TABLE TEXT NOT NULL,
        {p}_PARTITION TEXT,
        {p}_STATE CHAR(1) NOT NULL,
        {p}_TYPE CHAR(1) NOT NULL,
        {p}_TBLPROPERTIES TEXT,
        {p}_WORKER_ID TEXT,
        {p}_ENQUEUE_TIME BIGINT,
        {p}_START BIGINT,
        {extra}
        {p}_RUN_AS TEXT,
        {p}_HIGHEST_WRITE_ID BIGINT,
        {p}_META_INFO TEXT,
        {p}_HADOOP_JOB_ID TEXT,
        {p}_ERROR_MESSAGE TEXT,
        {p}_NEXT_TXN_ID BIGINT,
        {p}_TXN_ID BIGINT,
        {p}_COMMIT_TIME BIGINT,
        {p}_INITIATOR_ID TEXT,
        {p}_INITIATOR_VERSION TEXT,
        {p}_WORKER_VERSION TEXT,
        {p}_CLEANER_START BIGINT,
        {p}_RETRY_RETENTION BIGINT NOT NULL DEFAULT 0,
        {p}_POOL_NAME TEXT,
        {p}_NUMBER_OF_BUCKETS INTEGER,
        {p}_ORDER_BY TEXT
    )"""
        for table, p, extra in (
            ("COMPACTION_QUEUE", "CQ", ""),
            ("COMPLETED_COMPACTIONS", "CC", "CC_END BIGINT,"),
        )
    ],
    # -- catalog ---------------------------------------------------------------------------------
    """CREATE TABLE DBS (
        NAME TEXT PRIMARY KEY,
        LOCATION TEXT,
        DESCRIPTION TEXT NOT NULL DEFAULT '',
        OWNER TEXT NOT NULL DEFAULT '',
        CREATE_TIME BIGINT NOT NULL
    )""",
    # The default database has no location of its own: its tables live at <warehouse>/<table>.
    "INSERT INTO DBS (NAME, LOCATION, DESCRIPTION, CREATE_TIME) "
    "VALUES ('default', NULL, 'Default Hive database', 0)",
    """CREATE TABLE TBLS (
        TBL_DB TEXT NOT NULL,
        TBL_NAME TEXT NOT NULL,
        TBL_TYPE TEXT NOT NULL,
        LOCATION TEXT NOT NULL,
        INPUT_FORMAT TEXT NOT NULL,
        OUTPUT_FORMAT TEXT NOT NULL,
        SERDE TEXT NOT NULL,
        NUM_BUCKETS INTEGER NOT NULL,
        OWNER TEXT NOT NULL DEFAULT '',
        CREATE_TIME BIGINT NOT NULL,
        PRIMARY KEY (TBL_DB, TBL_NAME)
    )""",
    # COL_KIND: 'c' column, 'p' partition key, 'b' bucket column, 's' sort column.
    """CREATE TABLE TBL_COLUMNS (
        COL_DB TEXT NOT NULL,
        COL_TBL TEXT NOT NULL,
        COL_KIND CHAR(1) NOT NULL,
        COL_IDX INTEGER NOT NULL,
        COL_NAME TEXT NOT NULL,
        COL_TYPE TEXT,
        COL_ORDER INTEGER,
        PRIMARY KEY (COL_DB, COL_TBL, COL_KIND, COL_IDX)
    )""",
    """CREATE TABLE TABLE_PARAMS (
        TP_DB TEXT NOT NULL,
        TP_TBL TEXT NOT NULL,
        PARAM_KEY TEXT NOT NULL,
        PARAM_VALUE TEXT,
        PRIMARY KEY (TP_DB, TP_TBL, PARAM_KEY)
    )""",
    """CREATE TABLE PARTITIONS (
        PART_DB TEXT NOT NULL,
        PART_TBL TEXT NOT NULL,
        PART_NAME TEXT NOT NULL,
        LOCATION TEXT NOT NULL,
        CREATE_TIME BIGINT NOT NULL,
        PRIMARY KEY (PART_DB, PART_TBL, PART_NAME)
    )""",
]

_V2 = [
    # The compactor's lookups by target (txn/compaction_sql.py).
    "CREATE INDEX IF NOT EXISTS COMPACTION_QUEUE_TARGET_IDX "
    "ON COMPACTION_QUEUE (CQ_DATABASE, CQ_TABLE, CQ_PARTITION, CQ_STATE)",
    "CREATE INDEX IF NOT EXISTS COMPLETED_COMPACTIONS_TARGET_IDX "
    "ON COMPLETED_COMPACTIONS (CC_DATABASE, CC_TABLE, CC_PARTITION, CC_ID)",
]

# List bucketing (Hive's SkewedInfo and SDS.IS_STOREDASSUBDIRECTORIES, txn/skew_sql.py),
# keyed by (db, table, partition name or '' for the table) instead of Hive's SD ids. A
# row in SKEWED_INFO means "skewed"; the value lists are flattened (list index, position);
# a location-map key is the value tuple as a JSON array. IF NOT EXISTS: a store whose
# version rows were lowered (tests of older schemas) migrates again cleanly.
_V3 = [
    """CREATE TABLE IF NOT EXISTS SKEWED_INFO (
        SK_DB TEXT NOT NULL,
        SK_TBL TEXT NOT NULL,
        SK_PART TEXT NOT NULL,
        IS_STOREDASSUBDIRECTORIES INTEGER NOT NULL,
        PRIMARY KEY (SK_DB, SK_TBL, SK_PART)
    )""",
    """CREATE TABLE IF NOT EXISTS SKEWED_COL_NAMES (
        SK_DB TEXT NOT NULL,
        SK_TBL TEXT NOT NULL,
        SK_PART TEXT NOT NULL,
        INTEGER_IDX INTEGER NOT NULL,
        SKEWED_COL_NAME TEXT NOT NULL,
        PRIMARY KEY (SK_DB, SK_TBL, SK_PART, INTEGER_IDX)
    )""",
    """CREATE TABLE IF NOT EXISTS SKEWED_VALUES (
        SK_DB TEXT NOT NULL,
        SK_TBL TEXT NOT NULL,
        SK_PART TEXT NOT NULL,
        STRING_LIST_IDX INTEGER NOT NULL,
        INTEGER_IDX INTEGER NOT NULL,
        STRING_LIST_VALUE TEXT NOT NULL,
        PRIMARY KEY (SK_DB, SK_TBL, SK_PART, STRING_LIST_IDX, INTEGER_IDX)
    )""",
    """CREATE TABLE IF NOT EXISTS SKEWED_COL_VALUE_LOC_MAP (
        SK_DB TEXT NOT NULL,
        SK_TBL TEXT NOT NULL,
        SK_PART TEXT NOT NULL,
        LOC_KEY TEXT NOT NULL,
        LOCATION TEXT NOT NULL,
        PRIMARY KEY (SK_DB, SK_TBL, SK_PART, LOC_KEY)
    )""",
]

_V4 = [
    # Namespaces and links (txn/links_sql.py, docs/namespaces.md). Metastore-wide settings
    # (``namespace_mode``: 'on'/'off'), one row per key.
    """CREATE TABLE IF NOT EXISTS METASTORE_SETTINGS (
        SETTING_KEY TEXT PRIMARY KEY,
        SETTING_VALUE TEXT NOT NULL
    )""",
    # A link held by namespace LINK_DB to TARGET_DB.TARGET_TBL (named TARGET_TBL@TARGET_DB
    # in LINK_DB); IS_DYNAMIC 'Y' follows every partition of the target, 'N' only those in
    # LINK_PARTITIONS. No data is copied.
    """CREATE TABLE IF NOT EXISTS TBL_LINKS (
        LINK_DB TEXT NOT NULL,
        TARGET_DB TEXT NOT NULL,
        TARGET_TBL TEXT NOT NULL,
        IS_DYNAMIC CHAR(1) NOT NULL,
        OWNER TEXT NOT NULL DEFAULT '',
        CREATE_TIME BIGINT NOT NULL,
        PRIMARY KEY (LINK_DB, TARGET_DB, TARGET_TBL)
    )""",
    "CREATE INDEX IF NOT EXISTS TBL_LINKS_TARGET_IDX ON TBL_LINKS (TARGET_DB, TARGET_TBL)",
    """CREATE TABLE IF NOT EXISTS LINK_PARTITIONS (
        LP_LINK_DB TEXT NOT NULL,
        LP_TARGET_DB TEXT NOT NULL,
        LP_TARGET_TBL TEXT NOT NULL,
        LP_PART_NAME TEXT NOT NULL,
        CREATE_TIME BIGINT NOT NULL,
        PRIMARY KEY (LP_LINK_DB, LP_TARGET_DB, LP_TARGET_TBL, LP_PART_NAME)
    )""",
]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, tuple(_V1)),
    (2, tuple(_V2)),
    (3, tuple(_V3)),
    (4, tuple(_V4)),
)
"""``(version, statements)`` in ascending version order."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The version this code needs."""

READABLE_FROM_VERSION = 1
"""The oldest schema a read-only store can use as it is (later migrations only add
indexes, and tables whose absence means "none": version 3's list-bucketing tables are
read as "not skewed", :mod:`acidstream.txn.skew_sql`), so listing an older metastore needs no
migration."""


def migrate(tx: Tx, db: Database) -> int:
    """Apply every missing migration in this DB transaction; return the schema version.

    Serialised across processes by the backend (SQLite's write lock, a PostgreSQL advisory
    lock), so concurrent first opens create the schema once.

    Raises:
        ConfigError: the database was written by a newer acidstream.
    """
    db._lock_for_migration(tx)
    tx.x("CREATE TABLE IF NOT EXISTS SCHEMA_VERSION (VERSION INTEGER NOT NULL)")
    current = _version(tx)
    _refuse_newer(current)
    # By recorded version, not "above the highest": a metastore migrated while a lower
    # version was not yet released (a gap) still gets it once it is.
    applied = {int(r[0]) for r in tx.q("SELECT VERSION FROM SCHEMA_VERSION")}
    for version, statements in MIGRATIONS:
        if version not in applied:
            for sql in statements:
                tx.x(sql)
            tx.x("INSERT INTO SCHEMA_VERSION (VERSION) VALUES (?)", version)
    return SCHEMA_VERSION


def check_schema(tx: Tx, url: str) -> int:
    """For a read-only open: check the schema is there and current, changing nothing.

    Raises:
        ConfigError: no metastore schema at ``url`` (an empty database), or one this
            acidstream cannot read without migrating it (open it read-write once).
    """
    current = _version(tx)
    if current == 0:
        raise ConfigError(f"no metastore at {url}")
    _refuse_newer(current)
    if current < READABLE_FROM_VERSION:
        raise ConfigError(
            f"metastore at {url} has schema version {current}; this acidstream reads "
            f"{READABLE_FROM_VERSION} or later: open it read-write once to migrate it"
        )
    return current


def _version(tx: Tx) -> int:
    if not tx.has_table("SCHEMA_VERSION"):
        return 0
    row = tx.one("SELECT MAX(VERSION) FROM SCHEMA_VERSION")
    return int(row[0]) if row and row[0] is not None else 0


def _refuse_newer(current: int) -> None:
    if current > SCHEMA_VERSION:
        raise ConfigError(
            f"metastore schema version {current} is newer than this acidstream "
            f"({SCHEMA_VERSION}); upgrade acidstream"
        )
