// The kv-snapshot-lease workload's client service: Fluss's own Java client behind a
// JSON-lines protocol over TCP, because the Python binding has no lease calls. Compiled
// when the image is built; run in the cluster's client container as
//   fluss-node client --port PORT --bootstrap HOST:PORT[,HOST:PORT...] [--lease off]
// Every connection is served by a thread of its own: one request line in, one reply line
// out. Every request names everything it needs (the lease id, its duration), so nothing is
// kept between requests but the Fluss connection, which all of them share. A reply is
// {"ok": true, ...} or {"ok": false, "error": "...", "gone": bool}: gone when Fluss said
// the snapshot or one of its files does not exist, which is what the checker holds against
// a lease; every other failure is left undecided by the caller. `--lease off` is the
// negative control: lease calls are answered ok without asking Fluss, so nothing keeps the
// snapshots the workload reads.
//
// The kv-scan workload's calls (scan-open, scan-next, scan-close) live in KvScanCalls.java,
// loaded by name when it was compiled: it needs ScanKv, which only a Fluss client newer than
// 0.9.1 has, and this file must compile against the image's release too. Without it the
// scan calls answer that this Fluss has no KV scan sessions ("scan-support" asks).
//
// The move-leadership fault (nemesis/move_leadership.py, through harness/systems/fluss.py)
// asks here too: "leaders" lists the leader of every bucket of the workload's database;
// "drain" {"server": ID} moves every bucket leadership off a tablet server that keeps
// running (Fluss's own way: tag it TEMPORARY_OFFLINE, then a LEADER_DISTRIBUTION rebalance,
// whose plan moves each leader with a leader election the coordinator asks the replicas to
// apply; the call returns when the rebalance reached a final status); "undrain" removes the
// tag. Both are in every release with the rebalance API (0.9.0 onwards).

import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.KvSnapshotLease;
import org.apache.fluss.client.metadata.AcquireKvSnapshotLeaseResult;
import org.apache.fluss.client.metadata.KvSnapshotMetadata;
import org.apache.fluss.client.metadata.KvSnapshots;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.client.table.writer.UpsertResult;
import org.apache.fluss.client.table.writer.UpsertWriter;
import org.apache.fluss.client.FlussConnection;
import org.apache.fluss.client.metadata.MetadataUpdater;
import org.apache.fluss.cluster.rebalance.GoalType;
import org.apache.fluss.cluster.rebalance.RebalanceProgress;
import org.apache.fluss.cluster.rebalance.RebalanceStatus;
import org.apache.fluss.cluster.rebalance.ServerTag;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.fs.FsPathAndFileName;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.fluss.types.DataTypes;
import org.apache.fluss.utils.CloseableIterator;

public class LeaseClient {
    static final ObjectMapper JSON = new ObjectMapper();
    static final long TIMEOUT_MS = 10_000;

    /** Calls of a workload that are compiled only against a client that has them. */
    public interface Calls {
        boolean handles(String op);

        ObjectNode handle(String op, JsonNode req, ObjectNode reply) throws Exception;
    }

    final Configuration conf = new Configuration();
    final boolean leaseOff;
    final Map<String, Table> tables = new ConcurrentHashMap<>();
    final Map<String, UpsertWriter> writers = new ConcurrentHashMap<>();
    final Calls scanCalls = load("KvScanCalls");
    Connection conn;
    Admin adminClient;

    LeaseClient(String bootstrap, boolean leaseOff) {
        conf.setString("bootstrap.servers", bootstrap);
        conf.setString("client.request-timeout", "8s");
        conf.setString("client.scanner.io.tmpdir", System.getProperty("java.io.tmpdir"));
        this.leaseOff = leaseOff;
    }

    Calls load(String name) {
        try {
            return (Calls) Class.forName(name).getConstructor(LeaseClient.class).newInstance(this);
        } catch (ClassNotFoundException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot load " + name, e);
        }
    }

    // Made on the first request, not at start: the service starts with the cluster, and
    // Fluss's client refuses to start while no server answers.
    synchronized Connection connection() {
        if (conn == null) {
            conn = ConnectionFactory.createConnection(conf);
            adminClient = conn.getAdmin();
        }
        return conn;
    }

    Admin admin() {
        connection();
        return adminClient;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        boolean leaseOff = false;
        int port = 0;
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (args[i].equals("--bootstrap")) bootstrap = args[i + 1];
            else if (args[i].equals("--lease")) leaseOff = args[i + 1].equals("off");
            else if (args[i].equals("--port")) port = Integer.parseInt(args[i + 1]);
        }
        if (bootstrap == null || port == 0) {
            System.err.println("usage: LeaseClient --port PORT --bootstrap HOST:PORT [--lease off]");
            System.exit(2);
        }
        LeaseClient client = new LeaseClient(bootstrap, leaseOff);
        try (ServerSocket server = new ServerSocket(port)) {
            System.err.println("lease client listening on " + port + (leaseOff ? " (lease off)" : ""));
            while (true) {
                Socket socket = server.accept();
                Thread t = new Thread(() -> client.serve(socket));
                t.setDaemon(true);
                t.start();
            }
        }
    }

    void serve(Socket socket) {
        try (socket;
             BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
             PrintStream out = new PrintStream(socket.getOutputStream(), true, StandardCharsets.UTF_8)) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                ObjectNode reply;
                try {
                    reply = handle(JSON.readTree(line));
                } catch (Throwable t) {
                    reply = failure(t);
                }
                out.println(JSON.writeValueAsString(reply));
            }
        } catch (Exception e) {
            // the caller went away: nothing to answer
        }
    }

    static ObjectNode failure(Throwable t) {
        Throwable root = t;
        boolean gone = false;
        StringBuilder why = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            root = c;
            String name = c.getClass().getSimpleName();
            if (c instanceof FileNotFoundException || c instanceof NoSuchFileException
                    || name.equals("KvSnapshotNotExistException")) {
                gone = true;
            }
            if (c.getCause() == c) break;
        }
        if (t instanceof java.util.concurrent.TimeoutException) why.append("timeout");
        else why.append(root.getClass().getSimpleName()).append(": ").append(root.getMessage());
        ObjectNode r = JSON.createObjectNode();
        r.put("ok", false);
        r.put("error", why.length() > 400 ? why.substring(0, 400) : why.toString());
        r.put("gone", gone);
        return r;
    }

    static <T> T await(java.util.concurrent.CompletableFuture<T> f) throws Exception {
        try {
            return f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw (e.getCause() instanceof Exception) ? (Exception) e.getCause() : e;
        }
    }

    Table table(String name) {
        return tables.computeIfAbsent(name, n -> connection().getTable(path(n)));
    }

    static TablePath path(String name) {
        String[] parts = name.split("\\.");
        return TablePath.of(parts[0], parts[1]);
    }

    KvSnapshotLease lease(JsonNode req) {
        return admin().createKvSnapshotLease(req.get("lease").asText(), req.get("duration_ms").asLong());
    }

    ObjectNode handle(JsonNode req) throws Exception {
        ObjectNode r = JSON.createObjectNode();
        r.put("ok", true);
        String op = req.get("op").asText();
        switch (op) {
            case "setup": {
                TablePath p = path(req.get("table").asText());
                await(admin().createDatabase(p.getDatabaseName(), DatabaseDescriptor.EMPTY, true));
                // A table left by an earlier run would hold values this run writes again.
                await(admin().dropTable(p, true));
                Schema schema = Schema.newBuilder()
                        .column("k", DataTypes.STRING())
                        .column("v", DataTypes.BIGINT())
                        .primaryKey("k")
                        .build();
                TableDescriptor d = TableDescriptor.builder()
                        .schema(schema)
                        .distributedBy(req.get("buckets").asInt(), "k")
                        .build();
                await(admin().createTable(p, d, true));
                return r;
            }
            case "upsert": {
                String t = req.get("table").asText();
                UpsertWriter w = writers.computeIfAbsent(t, n -> table(n).newUpsert().createWriter());
                GenericRow row = GenericRow.of(BinaryString.fromString(req.get("key").asText()),
                        req.get("value").asLong());
                // One call at a time per writer: two threads upserting on one writer at
                // once had rows land in another key's bucket (see README).
                java.util.concurrent.CompletableFuture<UpsertResult> sent;
                synchronized (w) {
                    sent = w.upsert(row);
                }
                UpsertResult res = await(sent);
                r.put("bucket", res.getBucket().getBucket());
                r.put("log_end", res.getLogEndOffset());
                return r;
            }
            case "latest": {
                KvSnapshots s = await(admin().getLatestKvSnapshots(path(req.get("table").asText())));
                r.put("table_id", s.getTableId());
                ArrayNode list = r.putArray("snapshots");
                for (int b : new java.util.TreeSet<>(s.getBucketIds())) {
                    if (s.getSnapshotId(b).isEmpty()) continue;
                    ObjectNode e = list.addObject();
                    e.put("bucket", b);
                    e.put("snapshot", s.getSnapshotId(b).getAsLong());
                    e.put("log_offset", s.getLogOffset(b).getAsLong());
                }
                return r;
            }
            case "acquire": {
                long tableId = req.get("table_id").asLong();
                Map<TableBucket, Long> want = new HashMap<>();
                for (JsonNode e : req.get("snapshots")) {
                    want.put(new TableBucket(tableId, e.get("bucket").asInt()), e.get("snapshot").asLong());
                }
                ArrayNode unavailable = r.putArray("unavailable");
                if (leaseOff) return r;
                AcquireKvSnapshotLeaseResult res = await(lease(req).acquireSnapshots(want));
                for (Map.Entry<TableBucket, Long> e : res.getUnavailableSnapshots().entrySet()) {
                    ObjectNode u = unavailable.addObject();
                    u.put("bucket", e.getKey().getBucket());
                    u.put("snapshot", e.getValue());
                }
                return r;
            }
            case "renew":
                if (!leaseOff) await(lease(req).renew());
                return r;
            case "release": {
                long tableId = req.get("table_id").asLong();
                Set<TableBucket> buckets = new HashSet<>();
                for (JsonNode b : req.get("buckets")) buckets.add(new TableBucket(tableId, b.asInt()));
                if (!leaseOff) await(lease(req).releaseSnapshots(buckets));
                return r;
            }
            case "drop":
                if (!leaseOff) await(lease(req).dropLease());
                return r;
            case "read":
                return read(req, r);
            case "leaders":
                return leaders(req.get("database").asText(), r);
            case "drain":
                return drain(req.get("server").asInt(), req.get("timeout_ms").asLong(), r);
            case "undrain":
                try {
                    await(admin().removeServerTag(List.of(req.get("server").asInt()),
                            ServerTag.TEMPORARY_OFFLINE));
                } catch (Exception e) {
                    // no tag on it: nothing to undo
                    if (!e.getClass().getSimpleName().equals("ServerTagNotExistException")) throw e;
                }
                return r;
            case "scan-support":
                r.put("scan", scanCalls != null);
                return r;
            default:
                if (scanCalls != null && scanCalls.handles(op)) return scanCalls.handle(op, req, r);
                if (op.startsWith("scan-")) {
                    throw new UnsupportedOperationException("this Fluss client has no KV scan "
                            + "sessions (ScanKv)");
                }
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // Reads every file of the snapshot, then its rows through Fluss's own snapshot scanner.
    ObjectNode read(JsonNode req, ObjectNode r) throws Exception {
        TableBucket tb = new TableBucket(req.get("table_id").asLong(), req.get("bucket").asInt());
        long snapshot = req.get("snapshot").asLong();
        KvSnapshotMetadata meta = await(admin().getKvSnapshotMetadata(tb, snapshot));
        long bytes = 0;
        byte[] buf = new byte[1 << 16];
        List<FsPathAndFileName> files = meta.getSnapshotFiles();
        for (FsPathAndFileName f : files) {
            try (InputStream in = f.getPath().getFileSystem().open(f.getPath())) {
                for (int n; (n = in.read(buf)) > 0; ) bytes += n;
            }
        }
        Map<String, Long> rows = new TreeMap<>();
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        try (BatchScanner scanner = table(req.get("table").asText()).newScan().createBatchScanner(tb, snapshot)) {
            while (true) {
                if (System.currentTimeMillis() > deadline) throw new java.util.concurrent.TimeoutException();
                CloseableIterator<InternalRow> batch = scanner.pollBatch(Duration.ofSeconds(1));
                if (batch == null) break;
                try (batch) {
                    while (batch.hasNext()) {
                        InternalRow row = batch.next();
                        rows.put(row.getString(0).toString(), row.getLong(1));
                    }
                }
            }
        }
        r.put("log_offset", meta.getLogOffset());
        r.put("files", files.size());
        r.put("bytes", bytes);
        ObjectNode rowsNode = r.putObject("rows");
        rows.forEach(rowsNode::put);
        return r;
    }

    // The leader of every bucket of every table in the database, as a fresh metadata request
    // to the servers gives it (-1: none known).
    ObjectNode leaders(String database, ObjectNode r) throws Exception {
        ArrayNode list = r.putArray("leaders");
        List<String> names;
        try {
            names = await(admin().listTables(database));
        } catch (Exception e) {
            if (e.getClass().getSimpleName().equals("DatabaseNotExistException")) return r;
            throw e;
        }
        MetadataUpdater mu = ((FlussConnection) connection()).getMetadataUpdater();
        for (String name : new java.util.TreeSet<>(names)) {
            TablePath p = TablePath.of(database, name);
            TableInfo info = await(admin().getTableInfo(p));
            mu.updateTableOrPartitionMetadata(p, null);
            for (int b = 0; b < info.getNumBuckets(); b++) {
                ObjectNode e = list.addObject();
                e.put("table", p.toString());
                e.put("bucket", b);
                Integer leader = mu.getCluster().leaderFor(new TableBucket(info.getTableId(), b));
                e.put("leader", leader == null ? -1 : leader);
            }
        }
        return r;
    }

    ObjectNode drain(int server, long timeoutMs, ObjectNode r) throws Exception {
        try {
            await(admin().addServerTag(List.of(server), ServerTag.TEMPORARY_OFFLINE));
        } catch (Exception e) {
            // tagged already (an earlier drain not undone): the rebalance still moves leaders
            if (!e.getClass().getSimpleName().equals("ServerTagAlreadyExistException")) throw e;
        }
        String id = await(admin().rebalance(List.of(GoalType.LEADER_DISTRIBUTION)));
        r.put("rebalance", id);
        long deadline = System.currentTimeMillis() + timeoutMs;
        String status = "UNKNOWN";
        while (System.currentTimeMillis() < deadline) {
            java.util.Optional<RebalanceProgress> p = await(admin().listRebalanceProgress(id));
            if (p.isPresent()) {
                status = p.get().status().name();
                if (RebalanceStatus.FINAL_STATUSES.contains(p.get().status())) break;
            }
            Thread.sleep(200);
        }
        r.put("status", status);
        return r;
    }
}
