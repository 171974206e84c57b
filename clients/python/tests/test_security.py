"""TLS and bearer tokens: a server started with --tls-cert and --auth (as
docs/security.md sets one up, with openssl) is reached with tls= and token=,
and what is missing or wrong fails with the error that says so."""

import shutil
import subprocess

import pytest

import tern
from conftest import Server


def openssl(*args, cwd):
    if shutil.which("openssl") is None:
        pytest.fail("the TLS test makes its certificates with openssl: apt-get install openssl")
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def secured(tern_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=tern test CA", "-keyout", "ca-key.pem", "-out", "ca.pem", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=tern-server",
            "-keyout", "server-key.pem", "-out", "server.csr", cwd=d)
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", "2", "-extfile", "ext", "-out", "server.pem", cwd=d)
    tokens = {}
    for who in ("ops", "reader"):
        out = subprocess.run([str(tern_bin), "auth", "new-token"], check=True, capture_output=True, text=True)
        tokens[who] = out.stdout.splitlines()  # the token, its hash
    (d / "auth.yaml").write_text(f"""principals:
  - name: ops
    token_hash: "{tokens['ops'][1]}"
    grants:
      - {{prefix: "", allow: [read, append, subscribe, admin]}}
  - name: reader
    token_hash: "{tokens['reader'][1]}"
    grants:
      - {{prefix: "", allow: [read]}}
""")
    s = Server(tern_bin, d / "data", ["--tls-cert", str(d / "server.pem"), "--tls-key", str(d / "server-key.pem"),
                                      "--auth", str(d / "auth.yaml")], ca=d / "ca.pem")
    s.start()
    yield s, d / "ca.pem", tokens["ops"][0], tokens["reader"][0]
    s.stop()


def test_tls_and_a_token(secured, name):
    s, ca, ops, _ = secured
    with tern.connect(s.addr, tls=str(ca), token=ops) as c:
        log = c.create_log(name)
        with log.open_writer() as w:
            assert w.append(b"secret") == 0
            assert w.append_async(b"more").result() == 1
        assert [e.payload for e in log.open_reader(0)] == [b"secret", b"more"]
        with log.subscribe("s") as sub:
            assert next(sub).offset == 0
    # The CA as bytes, and the name the certificate holds.
    with tern.connect(s.addr, tls=tern.TLS(ca=ca.read_bytes(), server_name="localhost"), token=ops) as c:
        assert c.open_log(name).info().end == 2


def test_what_is_missing_or_wrong_says_so(secured, name, server):
    s, ca, ops, reader = secured
    with pytest.raises(tern.UnauthenticatedError, match="token"):
        tern.connect(s.addr, tls=str(ca))
    with pytest.raises(tern.UnauthenticatedError):
        tern.connect(s.addr, tls=str(ca), token="not-a-known-token")
    with pytest.raises(tern.TLSError, match="speaks TLS and the client does not"):
        tern.connect(s.addr, token=ops)
    with pytest.raises(tern.TLSError, match="refused the certificate"):
        tern.connect(s.addr, tls=True, token=ops)  # the system's CAs did not sign it
    with pytest.raises(tern.TLSError, match="does not speak TLS"):
        tern.connect(server.addr, tls=str(ca))  # a plaintext server
    with tern.connect(s.addr, tls=str(ca), token=reader) as c:
        with pytest.raises(tern.PermissionDeniedError):
            c.create_log(name + "-denied")
