"""A writer, a following reader and a subscriber ride through a restart of
the server (a clean stop, and a kill -9): every append is acknowledged once,
the reader returns each entry once, in order, and nothing is skipped."""

import signal
import threading

import pytest

import tern

N = 600


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stop", "kill"])
def test_follow_across_a_server_restart(fresh_server, name, sig):
    c = tern.connect(fresh_server.addr, retry_timeout=60)
    log = c.create_log(name)
    w = log.open_writer()
    reader = log.open_reader(0, follow=True)
    sub = log.subscribe("s")
    read: list[tern.Entry] = []
    subbed: list[int] = []
    errors: list[BaseException] = []

    def follow():
        try:
            while len(read) < N:
                read.append(reader.next(timeout=120))
        except BaseException as e:  # reported below
            errors.append(e)

    def consume():
        try:
            while not subbed or subbed[-1] < N - 1:
                e = sub.next(timeout=120)
                subbed.append(e.offset)
                sub.ack(e.offset)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=follow), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    futs = [w.append_async(b"%d" % i) for i in range(N // 3)]
    futs[-1].result(timeout=60)
    futs += [w.append_async(b"%d" % i) for i in range(N // 3, 2 * N // 3)]  # in flight as the server goes
    fresh_server.stop(sig)
    futs += [w.append_async(b"%d" % i) for i in range(2 * N // 3, N)]  # queued while it is away
    fresh_server.start()
    offs = [f.result(timeout=120) for f in futs]
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert offs == list(range(N)), "each append acknowledged once, in order"
    assert [(e.offset, e.payload) for e in read] == [(i, b"%d" % i) for i in range(N)]
    # At least once: a subscriber may get entries again from the committed cursor, never skip one.
    assert sorted(set(subbed)) == list(range(N))
    assert all(b <= a + 1 for a, b in zip(subbed, subbed[1:]))
    assert log.info().end == N
    sub.close()
    reader.close()
    w.close()
    c.close()
