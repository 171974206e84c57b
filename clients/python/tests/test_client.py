"""Logs and writers against a real tern serve: every call of Client, Log and
Writer, as users rely on them."""

import concurrent.futures
import datetime

import pytest

import tern


def test_connect_refuses_what_cannot_work(server):
    with pytest.raises(tern.InvalidArgumentError):
        tern.connect("")
    with pytest.raises(tern.InvalidArgumentError):
        tern.connect(server.addr, token="two words")
    from conftest import free_port

    with pytest.raises(tern.UnavailableError, match="is `tern serve` running"):
        tern.connect(f"127.0.0.1:{free_port()}", retry_timeout=0)
    # Another address of the same cluster answers: the first that does is used.
    with tern.connect(f"127.0.0.1:{free_port()}", nodes=[server.addr]) as c:
        assert c.addr == server.addr


def test_server_address_forms(server):
    from tern._addr import parse_server

    for given, want in [
        ("127.0.0.1:7071", ("127.0.0.1:7071", False)),
        ("127.0.0.1", ("127.0.0.1:7070", False)),
        (" localhost ", ("localhost:7070", False)),
        (":7072", ("127.0.0.1:7072", False)),
        ("http://host", ("host:7070", False)),
        ("HTTPS://host:9/", ("host:9", True)),
        ("[::1]", ("[::1]:7070", False)),
        ("::1", ("[::1]:7070", False)),
    ]:
        assert parse_server(given) == want, given
    for bad in ["https://", "grpc://host:7070", "host:port", "host:0", "host:70000", "host:7070/path", "a:b:c", "user@host"]:
        with pytest.raises(tern.InvalidArgumentError, match="host:port"):
            parse_server(bad)
    with pytest.raises(tern.InvalidArgumentError, match="grpc://"):
        tern.connect("grpc://" + server.addr)
    # As tern --server takes them: a scheme, and several nodes in one string.
    with tern.connect("http://" + server.addr, retry_timeout=0) as c:
        assert c.addr == server.addr
    from conftest import free_port

    with tern.connect(f"127.0.0.1:{free_port()},{server.addr}") as c:
        assert c.addr == server.addr


def test_logs(client, name):
    log = client.create_log(name, mode="local", options=tern.LogOptions(retention_entries=1000, segment_age=60))
    assert log.name == name
    assert log.options.mode == "local" and log.options.retention_entries == 1000 and log.options.segment_age == 60
    info = log.info()
    assert (info.name, info.start, info.end, info.epoch) == (name, 0, 0, 0)
    assert isinstance(info.created, datetime.datetime)
    client.create_log(name + "-b")
    names = [i.name for i in client.list_logs(name)]
    assert names == [name, name + "-b"]
    assert client.open_log(name).options == log.options
    client.delete_log(name + "-b")
    assert [i.name for i in client.list_logs(name)] == [name]
    with pytest.raises(tern.NotFoundError):
        client.open_log(name + "-b")


def test_the_contract_of_the_issue(client, name):
    log = client.create_log(name, mode="local")
    w = log.open_writer()
    off = w.append(b"payload", properties={"k": b"v"})
    first = w.append_batch([b"a", b"b"])
    fut = w.append_async(b"c")
    assert (off, first, fut.result()) == (0, 1, 3)
    got = []
    for e in log.open_reader(0, follow=True):
        got.append(e)
        if e.offset == 3:
            break
    assert [e.payload for e in got] == [b"payload", b"a", b"b", b"c"]
    assert got[0].properties == {"k": b"v"} and got[1].properties == {}
    assert all(isinstance(e.time, datetime.datetime) for e in got)
    assert got[1].time_unix_nano == got[2].time_unix_nano  # one batch, one time
    log.truncate(2)
    info = log.info()
    assert (info.start, info.end, info.epoch) == (2, 4, w.epoch)
    sub = log.subscribe("indexer")
    e = next(sub)
    assert e.offset == 2
    sub.ack(e.offset)
    sub.close()
    assert log.subscription("indexer").cursor == 3
    w.close()


def test_pipelined_appends_are_acknowledged_in_order(client, name):
    log = client.create_log(name)
    with log.open_writer() as w:
        futs = [w.append_async(b"%d" % i, {"i": b"%d" % i}) for i in range(2000)]
        futs.append(w.append_batch_async([b"x", (b"y", {"p": b"q"}), tern.Entry(payload=b"z")]))
        offs = [f.result(timeout=60) for f in futs]
    assert offs == list(range(2000)) + [2000]
    es = list(log.open_reader(1998))
    assert [(e.offset, e.payload) for e in es] == [(1998, b"1998"), (1999, b"1999"), (2000, b"x"), (2001, b"y"),
                                                  (2002, b"z")]
    assert es[3].properties == {"p": b"q"}


def test_concurrent_appenders_share_one_writer(client, name):
    log = client.create_log(name)
    with log.open_writer() as w, concurrent.futures.ThreadPoolExecutor(8) as pool:
        offs = list(pool.map(lambda i: w.append(b"%d" % i), range(400)))
    assert sorted(offs) == list(range(400))
    assert {e.payload for e in log.open_reader(0)} == {b"%d" % i for i in range(400)}


def test_epochs_fence_and_reopen(client, name):
    log = client.create_log(name)
    w1 = log.open_writer()
    w1.append(b"one")
    w2 = log.open_writer()
    assert w2.epoch > w1.epoch
    with pytest.raises(tern.FencedError):
        w1.append(b"stale")
    with pytest.raises(tern.FencedError):  # for good
        w1.append_async(b"stale").result()
    w1.close()  # a fenced writer's close ends nothing
    # A caller-chosen epoch: lower is fenced, equal reopens, higher fences.
    with pytest.raises(tern.FencedError):
        log.open_writer(epoch=w1.epoch)
    w2.detach()  # the session stays open
    again = log.open_writer(epoch=w2.epoch, only_reopen=True)
    assert again.epoch == w2.epoch
    assert again.append(b"two") == 1
    high = log.open_writer(epoch=w2.epoch + 10)
    assert high.epoch == w2.epoch + 10
    with pytest.raises(tern.FencedError):
        again.append(b"stale")
    with pytest.raises(tern.FencedError):
        log.open_writer(epoch=high.epoch + 1, only_reopen=True)
    assert log.info().epoch == high.epoch
    high.close()


def test_shared_producers_wait_for_the_writer_to_close(client, name):
    log = client.create_log(name)
    w = log.open_writer()
    w.append(b"exclusive")
    p = log.open_writer(shared=True)
    with pytest.raises(tern.FencedError):
        p.append(b"shared")
    w.close()  # ends the session: shared producers may append
    p2 = log.open_writer(shared=True)
    q = log.open_writer(shared=True)
    assert sorted([p2.append(b"s1"), q.append(b"s2")]) == [1, 2]
    with pytest.raises(tern.InvalidArgumentError):
        q.append_time_tick(1)
    with pytest.raises(tern.InvalidArgumentError):
        log.open_writer(epoch=3, shared=True)
    for x in (p, p2, q):
        x.close()


def test_closed_writer_and_client(server, name):
    c = tern.connect(server.addr)
    log = c.create_log(name)
    w = log.open_writer()
    fut = w.append_async(b"queued")
    w.close()
    assert fut.result() == 0  # close waits for what was queued
    with pytest.raises(tern.ClosedError):
        w.append(b"late")
    w2 = log.open_writer()
    futs = [w2.append_async(b"%d" % i) for i in range(100)]
    c.close()  # detaches the writer after its appends are answered
    assert [f.result() for f in futs] == list(range(1, 101))
    with pytest.raises(tern.ClosedError):
        w2.append(b"late")
    with pytest.raises(tern.ClosedError):
        log.info()
    with tern.connect(server.addr) as c2:
        # Detached, not closed: the session is still the log's newest.
        assert c2.open_log(name).open_writer(epoch=w2.epoch, only_reopen=True).append(b"x") == 101


def test_conditional_appends(client, name):
    log = client.create_log(name)
    with log.open_writer() as w:
        assert w.append(b"a", if_end=0) == 0
        assert w.append_batch([b"b", b"c"], if_end=1) == 1
        with pytest.raises(tern.ConditionFailedError) as ei:
            w.append(b"late", if_end=1)
        assert (ei.value.expected, ei.value.end) == (1, 3)
        assert w.append_async(b"d", if_end=3).result() == 3
    assert log.info().end == 4


def test_compression(client, name):
    log = client.create_log(name, mode="local", options=tern.LogOptions(compression="zstd"))
    assert log.options.compression == "zstd"
    w = log.open_writer()
    payloads = [b'{"id":%d,"user":"user-%d","op":"insert","tags":["alpha","beta"]}' % (i, i % 7) for i in range(300)]
    w.append_batch(payloads)
    got = []
    for e in log.open_reader(0):
        got.append(e.payload)
    assert got == payloads
    info = log.info()
    assert 0 < info.bytes and info.logical_bytes >= 2 * info.bytes
    with pytest.raises(tern.InvalidArgumentError, match="use none, zstd or lz4"):
        client.create_log(name + "-x", options=tern.LogOptions(compression="gzip"))
