"""A cluster of two tern serve nodes (the first's embedded etcd, on its unix
socket, is the second's metadata store; object logs in a directory store):
the client follows NOT_OWNER to the node that serves a log, and a writer and
a following reader ride through a kill -9 of that node while the log moves
to the other."""

import pytest

import tern
from conftest import Server


@pytest.fixture
def cluster(tern_bin, tmp_path):
    store = f"dir://{tmp_path / 'store'}"
    (tmp_path / "store").mkdir()
    common = ["--storage", store, "--node-ttl", "2s"]
    n1 = Server(tern_bin, tmp_path / "d1", ["--node-id", "n1", *common])
    n1.start()
    sock = tmp_path / "d1" / "etcd" / "client.sock"
    n2 = Server(tern_bin, tmp_path / "d2", ["--node-id", "n2", "--etcd", f"unix://{sock}", *common])
    n2.start()
    yield n1, n2
    n2.stop()
    n1.stop()


def test_redirects_and_a_move(cluster, name):
    n1, n2 = cluster
    c = tern.connect(n1.addr, nodes=[n2.addr], retry_timeout=60)
    with tern.connect(n2.addr) as c2:
        logs = [c2.create_log(f"{name}/{i}", mode="object") for i in range(8)]
    # The logs the second node serves: calls through the first are redirected there.
    on_n2 = []
    for log in logs:
        h = c.open_log(log.name)
        if h._at == n2.addr:
            on_n2.append(h)
    assert on_n2, "placement put no log on the second node"
    log = on_n2[0]
    w = log.open_writer()
    r = log.open_reader(0, follow=True)
    first = [w.append(b"%d" % i) for i in range(50)]
    assert first == list(range(50))
    n2.kill()
    # Queued while the log's node is dead; answered once the first node took it over.
    futs = [w.append_async(b"%d" % i) for i in range(50, 100)]
    assert [f.result(timeout=120) for f in futs] == list(range(50, 100))
    assert [(e.offset, e.payload) for e in (r.next(timeout=120) for _ in range(100))] == \
        [(i, b"%d" % i) for i in range(100)]
    assert log._at in ("", n1.addr)
    r.close()
    w.close()
    c.close()
