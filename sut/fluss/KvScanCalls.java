// The kv-scan workload's calls, beside LeaseClient.java (which loads this class when it was
// compiled): Fluss's KV scan sessions (ScanKv, the RPC behind KvBatchScanner) spoken one
// batch per request, so the workload decides when each continuation goes out and the
// history shows every batch. KvBatchScanner sends the next continuation as soon as a batch
// arrives and never retries one; speaking the RPC itself lets the workload pause between
// batches for as long as it chooses and resend a continuation as a client whose reply was
// lost would. Only a Fluss client with ScanKv (Fluss's main after 0.9.1) compiles this file;
// fluss-node leaves it out otherwise and the scan calls answer that the release has none.
//
// Requests (all name the scan by the workload's scan id, `scan`):
//   {"op": "scan-open", "scan": ID, "table": DB.T, "bucket": B, "batch_bytes": N}
//   {"op": "scan-next", "scan": ID, "seq": S}   continuation S (1, 2, ...); a resend of
//                                               the last one is the same request again
//   {"op": "scan-close", "scan": ID}
// Replies add rows [[key, value], ...] in the order of the batch, has_more, and for the
// open: scanner (the server's id, absent for an empty bucket), log_offset and leader (the server id
// the session lives on). A server's error is {"ok": false, "code": "SCANNER_EXPIRED", ...}
// with the leader the client's metadata names after it (leader_now).

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.fluss.client.FlussConnection;
import org.apache.fluss.client.metadata.ClientSchemaGetter;
import org.apache.fluss.client.metadata.MetadataUpdater;
import org.apache.fluss.metadata.SchemaGetter;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.record.DefaultValueRecordBatch;
import org.apache.fluss.record.ValueRecord;
import org.apache.fluss.record.ValueRecordReadContext;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.rpc.gateway.TabletServerGateway;
import org.apache.fluss.rpc.messages.PbScanReqForBucket;
import org.apache.fluss.rpc.messages.ScanKvRequest;
import org.apache.fluss.rpc.messages.ScanKvResponse;
import org.apache.fluss.rpc.protocol.Errors;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

public class KvScanCalls implements LeaseClient.Calls {
    /** One open session as the workload named it: where its continuations go. */
    static final class Session {
        final TablePath path;
        final TableBucket bucket;
        final int leader;
        final TabletServerGateway gateway;
        final int batchBytes;
        final ValueRecordReadContext readContext;
        final byte[] scannerId;

        Session(TablePath path, TableBucket bucket, int leader, TabletServerGateway gateway,
                int batchBytes, ValueRecordReadContext readContext, byte[] scannerId) {
            this.path = path;
            this.bucket = bucket;
            this.leader = leader;
            this.gateway = gateway;
            this.batchBytes = batchBytes;
            this.readContext = readContext;
            this.scannerId = scannerId;
        }
    }

    final LeaseClient client;
    final Map<String, Session> sessions = new ConcurrentHashMap<>();
    final Map<String, ValueRecordReadContext> contexts = new ConcurrentHashMap<>();

    public KvScanCalls(LeaseClient client) {
        this.client = client;
    }

    MetadataUpdater metadata() {
        return ((FlussConnection) client.connection()).getMetadataUpdater();
    }

    @Override
    public boolean handles(String op) {
        return op.startsWith("scan-");
    }

    @Override
    public ObjectNode handle(String op, JsonNode req, ObjectNode r) throws Exception {
        String scan = req.get("scan").asText();
        switch (op) {
            case "scan-open":
                return open(scan, req, r);
            case "scan-next":
                return next(scan, req.get("seq").asInt(), r);
            case "scan-close": {
                Session s = sessions.remove(scan);
                if (s != null && s.scannerId != null) {
                    ScanKvResponse resp = LeaseClient.await(s.gateway.scanKv(new ScanKvRequest()
                            .setScannerId(s.scannerId)
                            .setBatchSizeBytes(s.batchBytes)
                            .setCloseScanner(true)));
                    if (resp.hasErrorCode() && resp.getErrorCode() != 0) return error(s, resp, r);
                }
                return r;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    ObjectNode open(String scan, JsonNode req, ObjectNode r) throws Exception {
        TablePath path = LeaseClient.path(req.get("table").asText());
        TableInfo info = client.table(req.get("table").asText()).getTableInfo();
        TableBucket bucket = new TableBucket(info.getTableId(), req.get("bucket").asInt());
        MetadataUpdater mu = metadata();
        mu.checkAndUpdateMetadata(path, bucket);
        int leader = mu.leaderFor(path, bucket);
        TabletServerGateway gateway = mu.newTabletServerClientForNode(leader);
        if (gateway == null) throw new IllegalStateException("no gateway to leader " + leader);
        int batchBytes = req.get("batch_bytes").asInt();
        ValueRecordReadContext readContext = contexts.computeIfAbsent(path.toString(), p -> {
            SchemaGetter schemas = new ClientSchemaGetter(path, info.getSchemaInfo(),
                    client.admin());
            return ValueRecordReadContext.createReadContext(schemas,
                    info.getTableConfig().getKvFormat());
        });
        ScanKvResponse resp = LeaseClient.await(gateway.scanKv(new ScanKvRequest()
                .setBucketScanReq(new PbScanReqForBucket()
                        .setTableId(bucket.getTableId())
                        .setBucketId(bucket.getBucket()))
                .setBatchSizeBytes(batchBytes)
                .setCallSeqId(0)));
        r.put("leader", leader);
        if (resp.hasErrorCode() && resp.getErrorCode() != 0) {
            return error(new Session(path, bucket, leader, gateway, batchBytes, readContext,
                    null), resp, r);
        }
        byte[] id = resp.hasScannerId() ? resp.getScannerId() : null;
        Session s = new Session(path, bucket, leader, gateway, batchBytes, readContext, id);
        if (resp.hasLogOffset()) r.put("log_offset", resp.getLogOffset());
        if (id != null) r.put("scanner", new String(id, StandardCharsets.UTF_8));
        batch(s, resp, r);
        if (r.get("has_more").asBoolean()) sessions.put(scan, s);
        return r;
    }

    ObjectNode next(String scan, int seq, ObjectNode r) throws Exception {
        Session s = sessions.get(scan);
        if (s == null) throw new IllegalStateException("no open scan " + scan);
        ScanKvResponse resp = LeaseClient.await(s.gateway.scanKv(new ScanKvRequest()
                .setScannerId(s.scannerId)
                .setBatchSizeBytes(s.batchBytes)
                .setCallSeqId(seq)));
        if (resp.hasErrorCode() && resp.getErrorCode() != 0) return error(s, resp, r);
        batch(s, resp, r);
        // Kept after the last batch too: the workload may resend that continuation.
        return r;
    }

    static void batch(Session s, ScanKvResponse resp, ObjectNode r) {
        boolean more = resp.hasHasMoreResults() && resp.isHasMoreResults();
        r.put("has_more", more);
        ArrayNode rows = r.putArray("rows");
        if (!resp.hasRecords()) return;
        DefaultValueRecordBatch records = DefaultValueRecordBatch.pointToBytes(resp.getRecords());
        if (records.getRecordCount() == 0) return;
        for (ValueRecord record : records.records(s.readContext)) {
            InternalRow row = record.getRow();
            ArrayNode pair = rows.addArray();
            pair.add(row.getString(0).toString());
            pair.add(row.getLong(1));
        }
    }

    ObjectNode error(Session s, ScanKvResponse resp, ObjectNode r) {
        Errors error = Errors.forCode(resp.getErrorCode());
        r.put("ok", false);
        r.put("gone", false);
        r.put("code", error.name());
        String message = resp.hasErrorMessage() ? resp.getErrorMessage() : error.message();
        r.put("error", error.name() + ": " + (message.length() > 300 ? message.substring(0, 300) : message));
        try {
            // The bucket's leader as the client sees it after the error: a change of leader
            // is what excuses a session that ended early.
            MetadataUpdater mu = metadata();
            mu.updateTableOrPartitionMetadata(s.path, null);
            r.put("leader_now", mu.leaderFor(s.path, s.bucket));
        } catch (Exception e) {
            // unknown: the field stays out
        }
        return r;
    }

}
