package auth

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	hashA = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hashB = "sha256:" + "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// example is the auth file of docs/auth-file.md's example.
const example = `# who may do what on this server
principals:
  - name: ops
    token_hash: "` + hashA + `"
    grants:
      - {prefix: "", allow: [read, append, subscribe, admin]}
  - name: indexer
    subject: "CN=indexer"
    san: "indexer.example.com"
    grants:
      - {prefix: "tenant-a/", allow: [read, subscribe]}
      - prefix: tenant-b/
        allow:
          - read
    quotas: {append_bytes_per_second: 10MiB, append_burst_bytes: 20MiB, logs: 100, subscriptions: 20}
  - name: node-1
    subject: "CN=tern-node-1"
    node: true
`

func TestParseExample(t *testing.T) {
	p, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{Principals: []*Principal{
		{Name: "ops", TokenHash: hashA, Grants: []Grant{{Prefix: "", Allow: []Permission{Read, Append, Subscribe, Admin}}}},
		{Name: "indexer", Subject: "CN=indexer", SAN: "indexer.example.com",
			Grants: []Grant{{Prefix: "tenant-a/", Allow: []Permission{Read, Subscribe}}, {Prefix: "tenant-b/", Allow: []Permission{Read}}},
			Quotas: Quotas{AppendBytesPerSecond: 10 << 20, AppendBurstBytes: 20 << 20, Logs: 100, Subscriptions: 20}},
		{Name: "node-1", Subject: "CN=tern-node-1", Node: true},
	}}
	if !reflect.DeepEqual(p, want) {
		for i := range max(len(p.Principals), len(want.Principals)) {
			if i >= len(p.Principals) || i >= len(want.Principals) || !reflect.DeepEqual(p.Principals[i], want.Principals[i]) {
				t.Errorf("principal %d: got %+v", i, p.Principals[i])
			}
		}
	}
}

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		check      func(*Policy) bool
	}{
		{"plain integer sizes", "principals:\n- name: a\n  token_hash: " + hashA + "\n  quotas: {append_bytes_per_second: 1000, logs: 0}\n",
			func(p *Policy) bool { return p.Principals[0].Quotas == Quotas{AppendBytesPerSecond: 1000} }},
		{"powers of ten and spaces", "principals:\n- name: a\n  token_hash: " + hashA + "\n  quotas: {append_bytes_per_second: 2 MB}\n",
			func(p *Policy) bool { return p.Principals[0].Quotas.AppendBytesPerSecond == 2e6 }},
		{"no grants", "principals:\n- name: a\n  san: 10.0.0.1\n",
			func(p *Policy) bool { return p.Principals[0].SAN == "10.0.0.1" && p.Principals[0].Grants == nil }},
		{"a numeric name", "principals:\n- name: 42\n  subject: CN=x\n",
			func(p *Policy) bool { return p.Principals[0].Name == "42" }},
		{"node false with a token", "principals:\n- name: a\n  token_hash: " + hashA + "\n  node: false\n",
			func(p *Policy) bool { return !p.Principals[0].Node }},
		{"same subject as another's san", "principals:\n- name: a\n  subject: x\n- name: b\n  san: x\n",
			func(p *Policy) bool { return len(p.Principals) == 2 }},
		{"a subject with a comma", "principals:\n- name: a\n  subject: \"CN=indexer,O=acme\"\n",
			func(p *Policy) bool { return p.Principals[0].Subject == "CN=indexer,O=acme" }},
		{"an explicit document start and end", "---\nprincipals:\n- {name: a, subject: CN=a}\n...\n",
			func(p *Policy) bool { return len(p.Principals) == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(p) {
				t.Errorf("parsed %+v", p.Principals[0])
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	const ops = "principals:\n  - name: ops\n    token_hash: \"" + hashA + "\"\n" // lines 1-3
	for _, tc := range []struct {
		name, file string
		want       string // the message after "auth: "
	}{
		{"empty", "", "line 1: no principals: with --auth every call would be denied"},
		{"comments only", "# nothing\n", "line 1: no principals: with --auth every call would be denied"},
		{"no principals field", "{}\n", "line 1: no principals"},
		{"empty list", "principals: []\n", "line 1: no principals"},
		{"null list", "\nprincipals:\n", "line 2: no principals"},
		{"not a mapping", "- a\n", "line 1: an auth file is a mapping with one field, principals"},
		{"unknown top field", ops + "principal:\n", `line 4: the auth file: unknown field "principal": the fields are principals`},
		{"not YAML", ops + "  - name: [\n", "line 4: not valid YAML: "},
		{"tab indent", "principals:\n\t- name: a\n", "line 2: not valid YAML: found character that cannot start any token"},
		{"two documents", ops + "---\nprincipals: []\n", "line 4: a second YAML document starts here"},
		{"list of strings", "principals: ops\n", "line 1: principals is a list of principals"},
		{"principal not a mapping", ops + "  - ops\n", "line 4: principal #2 is not a mapping"},
		{"no name", ops + "  - subject: CN=x\n", `line 4: principal #2 has no name: add "name: ..."`},
		{"empty name", ops + "  - {name: \"\", subject: CN=x}\n", `line 4: principal #2: name "" is empty`},
		{"null name", ops + "  - {name: , subject: CN=x}\n", `line 4: principal #2: name has no value`},
		{"name a list", ops + "  - {name: [a], subject: CN=x}\n", `line 4: principal #2: name must be a single value`},
		{"duplicate name", ops + "  - name: ops\n    subject: CN=x\n", `line 4: principal "ops": name is also principal "ops"'s (line 2): names must be unique`},
		{"unknown principal field", ops + "    grant:\n      - {prefix: a, allow: [read]}\n", `line 4: principal #1: unknown field "grant": the fields are name, token_hash, subject, san, node, grants, quotas`},
		{"field twice", ops + "    token_hash: \"" + hashB + "\"\n", `line 4: principal #1: field "token_hash" given twice (first on line 3): keep one`},
		{"no identity", ops + "  - name: lost\n    grants: []\n", `line 4: principal "lost" has no way to authenticate: give it a token_hash`},
		{"raw token as hash", "principals:\n  - name: a\n    token_hash: s3cr3t-t0k3n-v4lu3-xxxxxxxxx\n", `line 3: principal "a": token_hash is not "sha256:" and 64 lowercase hex digits: put there what "tern auth hash-token" printed`},
		{"uppercase hash", "principals:\n  - name: a\n    token_hash: " + strings.ToUpper(hashA) + "\n", `line 3: principal "a": token_hash is not "sha256:"`},
		{"short hash", "principals:\n  - name: a\n    token_hash: " + hashA[:70] + "\n", `line 3: principal "a": token_hash is not "sha256:"`},
		{"shared token", ops + "  - name: b\n    token_hash: " + hashA + "\n", `line 5: principal "b": token_hash is also principal "ops"'s (line 3): each principal needs its own token`},
		{"shared subject", "principals:\n- {name: a, subject: CN=x}\n- {name: b, subject: CN=x}\n", `line 3: principal "b": subject is also principal "a"'s (line 2): a certificate must name one principal`},
		{"shared san", "principals:\n- {name: a, san: h.example}\n- {name: b, san: h.example}\n", `line 3: principal "b": san is also principal "a"'s (line 2)`},
		{"empty subject", "principals:\n- {name: a, subject: \"\", san: x}\n", `line 2: principal "a": subject is empty`},
		{"tagged value", "principals:\n- {name: a, subject: !!binary eA==}\n", `line 2: principal "a": subject has the YAML tag !!binary`},
		{"alias", "principals:\n- &p {name: a, subject: x}\n- *p\n", `line 3: principal #2: YAML aliases (*p) are not supported`},
		{"node yes", "principals:\n- {name: n, subject: x, node: yes}\n", `line 2: principal "n": node must be true or false`},
		{"node with a token only", "principals:\n- name: n\n  token_hash: " + hashA + "\n  node: true\n", `line 3: principal "n": a node cannot have a token_hash: nodes are certificate identities`},
		{"node with a token and a subject", "principals:\n- name: n\n  subject: CN=n\n  node: true\n  token_hash: " + hashA + "\n", `line 5: principal "n": a node cannot have a token_hash`},
		{"grants a mapping", ops + "    grants: {prefix: a, allow: [read]}\n", `line 4: principal "ops": grants is a list of {prefix: ..., allow: [...]}`},
		{"grant a string", ops + "    grants: [read]\n", `line 4: principal "ops": a grant is a mapping`},
		{"misspelt permission", ops + "    grants:\n      - {prefix: a/, allow: [read, wirte]}\n", `line 5: principal "ops": allow "wirte" is not a permission: use read, append, subscribe or admin`},
		{"capitalised permission", ops + "    grants:\n      - prefix: a/\n        allow:\n          - Read\n", `line 7: principal "ops": allow "Read" is not a permission`},
		{"allow a word", ops + "    grants:\n      - {prefix: a/, allow: read}\n", `line 5: principal "ops": allow is a list of one or more permissions`},
		{"allow empty", ops + "    grants:\n      - {prefix: a/, allow: []}\n", `line 5: principal "ops": allow is a list of one or more permissions`},
		{"no allow", ops + "    grants:\n      - {prefix: a/}\n", `line 5: principal "ops": the grant of prefix "a/" has no allow`},
		{"no prefix", ops + "    grants:\n      - {allow: [read]}\n", `line 5: principal "ops": a grant without a prefix: write prefix: "" to grant on every log`},
		{"null prefix", ops + "    grants:\n      - {prefix: , allow: [read]}\n", `line 5: principal "ops": prefix has no value`},
		{"unknown grant field", ops + "    grants:\n      - {prefix: a, allow: [read], deny: [admin]}\n", `line 5: principal "ops": grant: unknown field "deny": the fields are prefix, allow`},
		{"negative rate", ops + "    quotas:\n      append_bytes_per_second: -1MiB\n", `line 5: principal "ops": append_bytes_per_second "-1MiB" is negative`},
		{"negative logs", ops + "    quotas: {logs: -1}\n", `line 4: principal "ops": logs "-1" is negative`},
		{"negative subscriptions", ops + "    quotas:\n      subscriptions: -20\n", `line 5: principal "ops": subscriptions "-20" is negative`},
		{"bad size", ops + "    quotas: {append_burst_bytes: 10M, append_bytes_per_second: 1MiB}\n", `line 4: principal "ops": append_burst_bytes: size "10M": use a number of bytes`},
		{"fractional logs", ops + "    quotas: {logs: 1.5}\n", `line 4: principal "ops": logs "1.5" is not a whole number`},
		{"burst without rate", ops + "    quotas: {append_burst_bytes: 1MiB}\n", `line 4: principal "ops": append_burst_bytes without append_bytes_per_second`},
		{"unknown quota", ops + "    quotas:\n      streams: 3\n", `line 5: principal "ops": quotas: unknown field "streams"`},
		{"quotas a list", ops + "    quotas: [1]\n", `line 4: principal "ops": quotas is a mapping of append_bytes_per_second`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("parsed %+v", p)
			}
			if !errors.Is(err, ErrBadFile) {
				t.Errorf("error does not wrap ErrBadFile: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "auth: "+tc.want) {
				t.Errorf("error\n%v\nwant it to start\nauth: %s", err, tc.want)
			}
		})
	}
}

// A token pasted instead of its hash is not repeated in the error, which
// may end in a log.
func TestParseDoesNotEchoToken(t *testing.T) {
	const token = "pasted-by-mistake-0123456789"
	_, err := Parse([]byte("principals:\n- {name: a, token_hash: " + token + "}\n"))
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("error %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(good, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := Load(good); err != nil || len(p.Principals) != 3 {
		t.Fatalf("Load: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("principals:\n- {name: a, subject: x, grants: [{prefix: '', allow: [wirte]}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	want := "auth: " + bad + `: line 2: principal "a": allow "wirte" is not a permission: use read, append, subscribe or admin`
	if !errors.Is(err, ErrBadFile) || err.Error() != want {
		t.Errorf("Load: %v\nwant %s", err, want)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
}
