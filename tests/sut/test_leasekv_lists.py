"""leasekv's lists, MULTI/EXEC, scripts over lists and DynamoDB list_append and
transactions, on a real 3-node cluster of local processes: what redis-py and boto3 get,
followers' redirects, and the local-read bug reaching the new read paths."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis
from botocore.exceptions import ClientError
from test_leasekv_cluster import Cluster, running_cluster

APPEND = "SET #v = list_append(if_not_exists(#v, :empty), :val)"
READ_SCRIPT = ("local out = {} for i = 1, #KEYS do out[i] = redis.call('LRANGE', KEYS[i], 0, "
               "-1) end return out")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("leasekv-lists")) as c:
        yield c


def test_lists_and_multi_exec(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    r = cluster.redis(leader)
    assert r.rpush("l1", 1, 2) == 2
    assert r.lrange("l1", 0, -1) == [b"1", b"2"] and r.lrange("l1", -1, -1) == [b"2"]
    assert r.lrange("nothing", 0, -1) == [] and r.llen("l1") == 2
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("l1")
    p = r.pipeline(transaction=True)
    p.rpush("l1", 3).lrange("l1", 0, -1).rpush("l2", 9).lrange("l2", 0, -1)
    assert p.execute() == [3, [b"1", b"2", b"3"], 1, [b"9"]]
    # a command refused while queued aborts the whole transaction
    p = r.pipeline(transaction=True)
    p.rpush("l1", 4).execute_command("LPOP", "l1")
    with pytest.raises(redis.ResponseError, match="unknown command 'LPOP'"):
        p.execute()  # redis-py raises the queueing error; the server answered EXECABORT
    assert r.lrange("l1", 0, -1) == [b"1", b"2", b"3"]
    follower = cluster.redis(next(i for i in cluster.procs if i != leader))
    for call in (lambda: follower.lrange("l1", 0, -1), lambda: follower.rpush("l1", 5),
                 lambda: follower.pipeline(transaction=True).lrange("l1", 0, -1).execute()):
        with pytest.raises(redis.exceptions.MovedError):
            call()


def test_scripts_over_lists_read_on_the_lease_and_write_through_the_log(
        cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    r = cluster.redis(leader)
    r.rpush("s1", 1)
    read = r.register_script(READ_SCRIPT)
    append = r.register_script("return redis.call('RPUSH', KEYS[1], ARGV[1])")
    before = cluster.status(leader)
    assert read(keys=["s1", "s2"]) == [[b"1"], []]
    assert append(keys=["s1"], args=["2"]) == 2
    assert read(keys=["s1"]) == [[b"1", b"2"]]
    after = cluster.status(leader)
    assert before and after and after["fast_reads"] > before["fast_reads"]  # read scripts


def test_every_read_only_transaction_takes_the_read_path(cluster: Cluster) -> None:
    """A bare LRANGE and a read-only EXEC are answered by the read path (the lease, or a
    barrier when it has run out), as a GET is; an EXEC that also appends is one log entry
    and no read."""
    leader = cluster.wait_leader()
    r = cluster.redis(leader)
    r.rpush("ro1", 1)

    def reads_after(call: Callable[[], object]) -> int:
        before = cluster.status(leader)
        call()
        after = cluster.status(leader)
        assert before and after
        return sum(after[k] - before[k] for k in ("fast_reads", "slow_reads"))

    assert reads_after(lambda: r.lrange("ro1", 0, -1)) == 1
    assert reads_after(lambda: r.pipeline(transaction=True).lrange("ro1", 0, -1)
                       .lrange("ro2", 0, -1).execute()) == 1
    assert reads_after(lambda: r.pipeline(transaction=True).lrange("ro1", 0, -1)
                       .rpush("ro2", 1).execute()) == 0


def test_dynamodb_list_append_and_transactions(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    d = cluster.dynamo(leader)
    try:
        d.create_table(TableName="lists", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
    except ClientError as e:
        assert e.response["Error"]["Code"] == "ResourceInUseException"
    key = {"k": {"S": "a"}}
    for v in ("1", "2"):
        d.update_item(TableName="lists", Key=key, UpdateExpression=APPEND,
                      ExpressionAttributeNames={"#v": "v"},
                      ExpressionAttributeValues={":empty": {"L": []}, ":val": {"L": [{"N": v}]}})
    got = d.get_item(TableName="lists", Key=key, ConsistentRead=True)["Item"]["v"]
    assert got == {"L": [{"N": "1"}, {"N": "2"}]}
    gets = [{"Get": {"TableName": "lists", "Key": key}},
            {"Get": {"TableName": "lists", "Key": {"k": {"S": "b"}}}}]
    assert d.transact_get_items(TransactItems=gets)["Responses"] == [
        {"Item": {"k": {"S": "a"}, "v": got}}, {}]

    def write(expected: dict) -> dict:
        return {"TransactItems": [
            {"Update": {"TableName": "lists", "Key": key, "UpdateExpression": APPEND,
                        "ConditionExpression": "#v = :cv",
                        "ExpressionAttributeNames": {"#v": "v"},
                        "ExpressionAttributeValues": {":empty": {"L": []}, ":cv": expected,
                                                      ":val": {"L": [{"N": "3"}]}}}},
            {"Update": {"TableName": "lists", "Key": {"k": {"S": "b"}},
                        "UpdateExpression": APPEND, "ExpressionAttributeNames": {"#v": "v"},
                        "ExpressionAttributeValues": {":empty": {"L": []},
                                                      ":val": {"L": [{"N": "1"}]}}}}]}

    with pytest.raises(ClientError) as e:
        d.transact_write_items(**write({"L": [{"N": "1"}]}))  # a stale snapshot: cancelled
    assert e.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert d.transact_get_items(TransactItems=gets)["Responses"][1] == {}  # nothing applied
    d.transact_write_items(**write(got))
    both = d.transact_get_items(TransactItems=gets)["Responses"]
    assert [x["Item"]["v"]["L"] for x in both] == [[{"N": "1"}, {"N": "2"}, {"N": "3"}],
                                                   [{"N": "1"}]]
    follower = cluster.dynamo(next(i for i in cluster.procs if i != leader))
    with pytest.raises(ClientError) as e:
        follower.transact_get_items(TransactItems=gets)
    assert e.value.response["Error"]["Code"] == "NotLeaderException"


def test_the_local_read_bug_reaches_every_new_read_path(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """bug=local-read: a follower answers LRANGE, a read-only EXEC, a read-only script and
    TransactGetItems from its own state (a correct one redirects: the tests above); writes
    still go to the leader."""
    c = Cluster(tmp_path_factory.mktemp("leasekv-local-read"))
    c.args = ["--bug", "local-read"]
    for i in c.nodes:
        c.start(i)
    try:
        leader = c.wait_leader()
        c.redis(leader).rpush("b1", 1)
        d = c.dynamo(leader)
        d.create_table(TableName="lists", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
        follower = next(i for i in c.procs if i != leader)
        f = c.redis(follower)
        f.lrange("b1", 0, -1)  # answered, whatever it has applied by now
        assert f.pipeline(transaction=True).lrange("b1", 0, -1).llen("b1").execute()[1] in (0, 1)
        assert f.eval(READ_SCRIPT, 1, "b1") in ([[]], [[b"1"]])
        gets = [{"Get": {"TableName": "lists", "Key": {"k": {"S": "a"}}}}]
        try:
            c.dynamo(follower).transact_get_items(TransactItems=gets)
        except ClientError as e:  # the follower may not have the table yet: not a redirect
            assert e.response["Error"]["Code"] == "ResourceNotFoundException"
        with pytest.raises(redis.exceptions.MovedError):
            f.rpush("b1", 2)
        status = c.status(follower)
        assert status and status["local_reads"] >= 4
    finally:
        c.stop_all()
