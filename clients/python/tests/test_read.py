"""Readers, subscriptions and time ticks against a real tern serve."""

import threading

import pytest

import tern


def fill(log, n, prefix=b"e"):
    with log.open_writer() as w:
        w.append_batch([prefix + b"%d" % i for i in range(n)])


def test_readers(client, name):
    log = client.create_log(name)
    fill(log, 5)
    assert [e.offset for e in log.open_reader()] == [0, 1, 2, 3, 4]  # FROM_START by default
    assert [e.offset for e in log.open_reader(3)] == [3, 4]
    assert list(log.open_reader(5)) == []  # at the end, not following
    log.truncate(2)
    assert [e.offset for e in log.open_reader(tern.FROM_START)] == [2, 3, 4]
    r = log.open_reader(tern.FROM_END, follow=True)
    assert r.position == 5  # the server resolved FROM_END when it opened
    with pytest.raises(TimeoutError):
        r.next(timeout=0.2)
    with log.open_writer() as w:
        w.append(b"new")
    e = r.next(timeout=30)
    assert (e.offset, e.payload) == (5, b"new")
    r.close()
    assert r.next() is None


def test_close_ends_a_following_iteration(client, name):
    log = client.create_log(name)
    fill(log, 2)
    r = log.open_reader(0, follow=True)
    got = []
    t = threading.Thread(target=lambda: got.extend(r))
    t.start()
    while len(got) < 2:
        t.join(0.01)
    r.close()
    t.join(10)
    assert not t.is_alive() and [e.offset for e in got] == [0, 1]


def test_time_ticks(client, name):
    log = client.create_log(name)
    r = log.open_reader(0, follow=True, ticks=True)
    sub_plain = log.open_reader(0, follow=True)
    with log.open_writer() as w:
        w.append(b"a")
        w.append_time_tick(42)
        w.append(b"b")
    items = [r.next(timeout=30) for _ in range(3)]
    assert items[0].payload == b"a"
    assert items[1] == tern.TimeTick(time=42, offset=1)
    assert items[2].payload == b"b"
    assert [sub_plain.next(timeout=30).payload for _ in range(2)] == [b"a", b"b"]  # no ticks unless asked
    r.close()
    sub_plain.close()


def test_subscriptions(client, name):
    log = client.create_log(name)
    fill(log, 6)
    info = log.create_subscription("a", from_=1, pin=True)
    assert (info.name, info.cursor, info.pin, info.lag) == ("a", 1, True, 5)
    log.create_subscription("b", from_end=True)
    assert [(s.name, s.cursor) for s in log.subscriptions()] == [("a", 1), ("b", 6)]
    with log.subscribe("a", create=False) as sub:
        es = [next(sub) for _ in range(3)]
        assert [e.offset for e in es] == [1, 2, 3]
        with pytest.raises(tern.OutOfRangeError):
            sub.ack(4)  # not delivered yet
        sub.ack(2)
    assert log.subscription("a").cursor == 3  # committed when the stream ended
    with log.subscribe("a") as sub:
        assert next(sub).offset == 3  # delivered, not acknowledged: again
    log.seek("a", 5)
    with log.subscribe("a") as sub:
        e = sub.next(timeout=30)
        assert e.offset == 5
        sub.ack(e.offset)
        with pytest.raises(TimeoutError):
            sub.next(timeout=0.2)
    assert log.subscription("a").lag == 0
    log.delete_subscription("b")
    assert [s.name for s in log.subscriptions()] == ["a"]
    with pytest.raises(tern.SubscriptionNotFoundError):
        log.delete_subscription("b")
    with pytest.raises(tern.InvalidNameError):
        log.subscribe("no/slash")


def test_a_new_subscriber_takes_over(client, name):
    log = client.create_log(name)
    fill(log, 3)
    first = log.subscribe("s")
    assert next(first).offset == 0
    second = log.subscribe("s")
    assert next(second).offset == 0
    with pytest.raises(tern.TakenOverError):
        while True:
            first.next(timeout=30)
    first.close()
    second.close()


def test_subscriber_ticks_and_truncation(client, name):
    log = client.create_log(name)
    fill(log, 4)
    log.create_subscription("s")
    log.truncate(2)
    with pytest.raises(tern.TruncatedError) as ei:
        log.subscribe("s")
    assert ei.value.start == 2
    log.seek("s", 2)
    with log.subscribe("s", ticks=True) as sub:
        assert [next(sub).offset for _ in range(2)] == [2, 3]
        with log.open_writer() as w:
            w.append_time_tick(7)
        assert sub.next(timeout=30) == tern.TimeTick(time=7, offset=4)
