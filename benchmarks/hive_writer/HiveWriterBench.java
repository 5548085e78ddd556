/*
 * Hive 2.3's own ACID writer (OrcRecordUpdater) as a benchmark peer for acidstream.
 *
 * Compiled with javac at run time by benchmarks/hive_writer/driver.py against the jars of the
 * pyspark wheel (hive-exec-2.3.10-core, Hadoop, ORC); not part of the acidstream package.
 *
 * It drives OrcRecordUpdater the way Hive 2.3's hcatalog streaming API does
 * (org.apache.hive.hcatalog.streaming: TransactionBatchImpl + AbstractRecordWriter +
 * StrictDelimitedInputWriter):
 *   - fetchTransactionBatch -> RecordWriter.newBatch(minTxn, maxTxn): one RecordUpdater per
 *     bucket, from OrcOutputFormat.getRecordUpdater(tableDir, AcidOutputFormat.Options with
 *     writingBase=false, bucket, minimum/maximum transaction id of the batch, statementId -1,
 *     finalDestination, the table's properties), created at the batch's first write;
 *   - write -> RecordUpdater.insert(txnId, row) per row;
 *   - commit -> RecordWriter.flush() -> RecordUpdater.flush(): an intermediate ORC footer and
 *     its length appended to the side file (bucket_N_flush_length), both hflushed; Hive then
 *     commits the txn in the metastore, which this peer does not do (no metastore here);
 *   - close -> RecordUpdater.close(false).
 * A batch of one txn has no side file in Hive 2.3 (OrcRecordUpdater creates it only when the
 * minimum and maximum transaction ids differ, and its flush() throws without it): its commit
 * closes the updater instead, which writes the final footer.
 * With --fsync, each commit also fsyncs the bucket file and the side file
 * (FileChannel.force(true)), which Hive's writer never does on a local file system.
 *
 * Input: a file of rows "id<TAB>name<TAB>salary\n" (the benchmark's rows, written by the Python
 * side), loaded into memory before any timing. The JVM start, class loading and one untimed
 * warm-up case are outside the timed section: each case is timed with System.nanoTime from the
 * first updater's creation to the last close, and reported as one JSON line on stdout.
 *
 * Row input modes:
 *   objects    - rows handed to insert() as a struct of Hadoop writables (LongWritable, Text,
 *                IntWritable) set from in-memory columns: the cheapest input Hive's writer takes
 *                (the peer of acidstream's typed rows and Arrow input);
 *   delimited  - each record's bytes parsed by LazySimpleSerDe as StrictDelimitedInputWriter
 *                does (encode(record) = serde.deserialize(new Text(record))), the peer of
 *                acidstream's delimited records.
 *
 * Usage: HiveWriterBench --rows FILE --warmup DIR [--case NAME,DIR,ROWS_PER_TXN,TXNS,TXNS_PER_BATCH,FSYNC,MODE]...
 */

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.ql.io.AcidOutputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.RecordUpdater;
import org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat;
import org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorFactory;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.orc.impl.OrcAcidUtils;

public final class HiveWriterBench {

  /** The benchmark's rows, column by column (objects mode) and as delimited records. */
  private static final class Rows {
    final long[] ids;
    final byte[][] names;
    final int[] salaries;
    final byte[][] records;

    Rows(long[] ids, byte[][] names, int[] salaries, byte[][] records) {
      this.ids = ids;
      this.names = names;
      this.salaries = salaries;
      this.records = records;
    }

    int size() {
      return ids.length;
    }
  }

  /** One timed case: txns of rowsPerTxn rows, txnsPerBatch txns per transaction batch. */
  private static final class Case {
    final String name;
    final Path tableDir;
    final int rowsPerTxn;
    final int txns;
    final int txnsPerBatch;
    final boolean fsync;
    final boolean delimited;

    Case(String spec) {
      String[] p = spec.split(",");
      if (p.length != 7) {
        throw new IllegalArgumentException("--case NAME,DIR,ROWS_PER_TXN,TXNS,TXNS_PER_BATCH,FSYNC,MODE: " + spec);
      }
      name = p[0];
      tableDir = new Path(new java.io.File(p[1]).getAbsoluteFile().toURI());
      rowsPerTxn = Integer.parseInt(p[2]);
      txns = Integer.parseInt(p[3]);
      txnsPerBatch = Integer.parseInt(p[4]);
      fsync = p[5].equals("1");
      if (!p[6].equals("objects") && !p[6].equals("delimited")) {
        throw new IllegalArgumentException("MODE is objects or delimited: " + spec);
      }
      delimited = p[6].equals("delimited");
    }
  }

  private static final String[] COLUMNS = {"id", "name", "salary"};

  private final HiveConf conf;
  private final Properties tableProperties;
  private final ObjectInspector objectsInspector;
  private final LazySimpleSerDe serde;
  private final OrcOutputFormat outputFormat = new OrcOutputFormat();

  private HiveWriterBench() throws Exception {
    // hcatalog streaming builds a HiveConf (HiveEndPoint.createHiveConf); the ORC settings of
    // the delta files come from it and from the table's parameters.
    conf = new HiveConf(HiveWriterBench.class);
    tableProperties = new Properties();
    tableProperties.setProperty("transactional", "true");
    objectsInspector =
        ObjectInspectorFactory.getStandardStructObjectInspector(
            Arrays.asList(COLUMNS),
            Arrays.<ObjectInspector>asList(
                PrimitiveObjectInspectorFactory.writableLongObjectInspector,
                PrimitiveObjectInspectorFactory.writableStringObjectInspector,
                PrimitiveObjectInspectorFactory.writableIntObjectInspector));
    // StrictDelimitedInputWriter's serde: LazySimpleSerDe over the table's columns.
    serde = new LazySimpleSerDe();
    Properties serdeProps = new Properties();
    serdeProps.setProperty("columns", String.join(",", COLUMNS));
    serdeProps.setProperty("columns.types", "bigint:string:int");
    serdeProps.setProperty("field.delim", "\t");
    serdeProps.setProperty("serialization.format", "\t");
    serde.initialize(conf, serdeProps);
  }

  private static Rows loadRows(String file) throws IOException {
    List<String> lines = Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8);
    int n = lines.size();
    long[] ids = new long[n];
    byte[][] names = new byte[n][];
    int[] salaries = new int[n];
    byte[][] records = new byte[n][];
    for (int i = 0; i < n; i++) {
      String line = lines.get(i);
      String[] f = line.split("\t", -1);
      ids[i] = Long.parseLong(f[0]);
      names[i] = f[1].getBytes(StandardCharsets.UTF_8);
      salaries[i] = Integer.parseInt(f[2]);
      records[i] = line.getBytes(StandardCharsets.UTF_8);
    }
    return new Rows(ids, names, salaries, records);
  }

  /**
   * What one case did: wall and CPU seconds (the whole JVM's, GC included) of the timed section,
   * and whether hflush reached the OS.
   */
  private static final class Result {
    double seconds;
    double cpuSeconds;
    long rows;
    int files;
    boolean flushVisible = true;
  }

  private RecordUpdater newUpdater(Path tableDir, long minTxn, long maxTxn, boolean delimited)
      throws Exception {
    // AbstractRecordWriter.createRecordUpdater (Hive 2.3: transaction ids, statement -1).
    AcidOutputFormat.Options options =
        new AcidOutputFormat.Options(conf)
            .inspector(delimited ? serde.getObjectInspector() : objectsInspector)
            .bucket(0)
            .writingBase(false)
            .tableProperties(tableProperties)
            .minimumTransactionId(minTxn)
            .maximumTransactionId(maxTxn)
            .statementId(-1)
            .finalDestination(tableDir);
    return outputFormat.getRecordUpdater(tableDir, options);
  }

  private Path bucketFile(Path tableDir, long minTxn, long maxTxn) {
    AcidOutputFormat.Options options =
        new AcidOutputFormat.Options(conf)
            .bucket(0)
            .writingBase(false)
            .minimumTransactionId(minTxn)
            .maximumTransactionId(maxTxn)
            .statementId(-1);
    return AcidUtils.createFilename(tableDir, options);
  }

  private static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  private static void fsync(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(Paths.get(file.toUri()), StandardOpenOption.WRITE)) {
      ch.force(true);
    }
  }

  /**
   * Runs one case. With checkFlush (the warm-up), after each commit the bucket file's length on
   * disk is compared with the length the side file just recorded: it shows whether the hflush
   * handed the bytes to the OS (so the fsync of the file descriptor makes them durable).
   */
  private Result run(Case c, Rows rows, boolean checkFlush) throws Exception {
    if (c.rowsPerTxn * (long) c.txns > rows.size()) {
      throw new IllegalArgumentException(c.name + ": needs more rows than the file holds");
    }
    FileSystem fs = c.tableDir.getFileSystem(conf);
    fs.mkdirs(c.tableDir);
    Result r = new Result();
    // Reused row objects, as hcatalog's serde reuses its lazy struct.
    LongWritable id = new LongWritable();
    Text name = new Text();
    IntWritable salary = new IntWritable();
    List<Object> row = new ArrayList<>(Arrays.<Object>asList(id, name, salary));
    Text record = new Text();
    int next = 0;
    long txnId = 1;
    long cpu0 = processCpuNanos();
    long t0 = System.nanoTime();
    for (int first = 0; first < c.txns; first += c.txnsPerBatch) {
      int inBatch = Math.min(c.txnsPerBatch, c.txns - first);
      long minTxn = txnId;
      long maxTxn = txnId + inBatch - 1;
      RecordUpdater updater = null;
      Path bucket = null;
      for (int k = 0; k < inBatch; k++, txnId++) {
        for (int i = 0; i < c.rowsPerTxn; i++, next++) {
          Object value;
          if (c.delimited) {
            record.set(rows.records[next]);
            value = serde.deserialize(record);
          } else {
            id.set(rows.ids[next]);
            name.set(rows.names[next]);
            salary.set(rows.salaries[next]);
            value = row;
          }
          if (updater == null) {
            updater = newUpdater(c.tableDir, minTxn, maxTxn, c.delimited);
            bucket = bucketFile(c.tableDir, minTxn, maxTxn);
            r.files++;
          }
          updater.insert(txnId, value);
        }
        if (minTxn == maxTxn) {
          // A one-txn batch: OrcRecordUpdater refuses flush() without a side file ("Record
          // updaters with a single transaction should be closed rather than flushed"), so the
          // commit closes the file (final footer), as hcatalog's batch close would.
          updater.close(false);
          if (c.fsync) {
            fsync(bucket);
          }
          continue;
        }
        updater.flush();
        if (c.fsync) {
          fsync(bucket);
          fsync(OrcAcidUtils.getSideFile(bucket));
        }
        if (checkFlush) {
          long recorded = OrcAcidUtils.getLastFlushLength(fs, bucket);
          long onDisk = Files.size(Paths.get(bucket.toUri()));
          r.flushVisible &= onDisk >= recorded;
        }
      }
      if (updater != null && minTxn != maxTxn) {
        // RecordWriter.closeBatch: the final footer; the side file is deleted.
        updater.close(false);
      }
    }
    r.seconds = (System.nanoTime() - t0) / 1e9;
    r.cpuSeconds = (processCpuNanos() - cpu0) / 1e9;
    r.rows = next;
    return r;
  }

  private static String json(Case c, Result r) {
    return String.format(
        Locale.ROOT,
        "{\"name\": \"%s\", \"seconds\": %.6f, \"cpu_seconds\": %.6f, \"txns\": %d, \"rows\": %d, \"txns_per_batch\": %d,"
            + " \"fsync\": %b, \"mode\": \"%s\", \"files\": %d, \"flush_visible\": %b}",
        c.name, r.seconds, r.cpuSeconds, c.txns, r.rows, c.txnsPerBatch, c.fsync,
        c.delimited ? "delimited" : "objects", r.files, r.flushVisible);
  }

  public static void main(String[] args) throws Exception {
    String rowsFile = null;
    String warmupDir = null;
    List<Case> cases = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--rows":
          rowsFile = args[++i];
          break;
        case "--warmup":
          warmupDir = args[++i];
          break;
        case "--case":
          cases.add(new Case(args[++i]));
          break;
        default:
          throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (rowsFile == null || warmupDir == null) {
      throw new IllegalArgumentException("--rows FILE and --warmup DIR are required");
    }
    // Hadoop and Hive log to stdout through log4j on some paths: keep stdout for the results.
    PrintStream out = System.out;
    System.setOut(System.err);
    Rows rows = loadRows(rowsFile);
    HiveWriterBench bench = new HiveWriterBench();
    // Untimed warm-up of each path the cases take (one-txn batches, multi-txn batches, the
    // delimited parse), 200 txns each, so the timed cases see the JIT's steady state as a
    // long-running streaming writer would; it also checks that hflush reaches the OS. Reported
    // so the driver can refuse a peer whose flush stays in a Java buffer.
    int warmPerTxn = Math.min(rows.size(), 1000);
    int warmTxns = Math.max(1, Math.min(200, rows.size() / warmPerTxn));
    String[][] warmups = {{"objects", "1"}, {"objects", "10"}, {"delimited", "10"}};
    for (String[] m : warmups) {
      String name = "warmup-" + m[0] + "-" + m[1];
      Case w =
          new Case(
              name + "," + warmupDir + "/" + name + "," + warmPerTxn + "," + warmTxns + ","
                  + m[1] + ",1," + m[0]);
      out.println(json(w, bench.run(w, rows, true)));
      w.tableDir.getFileSystem(bench.conf).delete(w.tableDir, true);
    }
    for (Case c : cases) {
      out.println(json(c, bench.run(c, rows, false)));
      out.flush();
    }
  }
}
