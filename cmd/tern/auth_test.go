package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ternwal/tern/internal/auth"
)

func TestAuthNewToken(t *testing.T) {
	dir := t.TempDir()
	out := must(t, dir, "", "auth", "new-token")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != 43 {
		t.Fatalf("new-token printed %q", out)
	}
	if h, err := auth.HashToken(lines[0]); err != nil || h != lines[1] {
		t.Errorf("new-token's hash %q, HashToken's %q, %v", lines[1], h, err)
	}
	// hash-token agrees, and the policy of a file with that hash knows the token.
	if got := must(t, dir, lines[0]+"\n", "auth", "hash-token"); got != lines[1]+"\n" {
		t.Errorf("hash-token printed %q, want %q", got, lines[1])
	}
	p, err := auth.Parse([]byte("principals:\n- {name: me, token_hash: \"" + lines[1] + "\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := p.ByToken(lines[0]); !ok || pr.Name != "me" {
		t.Errorf("ByToken of new-token's token: %v, %v", pr, ok)
	}
	if again := must(t, dir, "", "auth", "new-token"); again == out {
		t.Error("new-token printed the same token twice")
	}
	if help := must(t, dir, "", "auth", "new-token", "--help"); !strings.Contains(help, "token_hash:") || !strings.Contains(help, "second") {
		t.Errorf("new-token's help lacks the example file:\n%s", help)
	}
}

func TestAuthHashToken(t *testing.T) {
	dir := t.TempDir()
	const token = "0123456789abcdefXYZ"
	want, _ := auth.HashToken(token)
	for _, stdin := range []string{token, token + "\n", token + "\r\n"} {
		if got := must(t, dir, stdin, "auth", "hash-token"); got != want+"\n" {
			t.Errorf("hash-token of %q printed %q, want %q", stdin, got, want)
		}
	}
	for _, tc := range []struct {
		stdin string
		want  string
	}{
		{"", "no token on stdin"},
		{"\n", "no token on stdin"},
		{token + "\n" + token + "\n", "stdin holds 2 lines: give one token"},
		{token + "\n\n", "stdin holds 2 lines"},
		{"short\n", "the token is 5 bytes, fewer than 16: tokens are random secrets; make one with \"tern auth new-token\""},
		{"correct horse battery staple\n", "whitespace"},
		{strings.Repeat("x", 1<<20), "more than 64KiB"},
	} {
		stderr := fails(t, 1, dir, tc.stdin, []string{"auth", "hash-token"}, tc.want)
		if strings.Contains(stderr, "horse") {
			t.Errorf("the error shows the token: %s", stderr)
		}
	}
}

func TestAuthCheck(t *testing.T) {
	dir := t.TempDir()
	tok, _ := auth.NewToken()
	hash, _ := auth.HashToken(tok)
	good := filepath.Join(dir, "auth.yaml")
	writeAuthFile(t, good, `principals:
  - name: ops
    token_hash: "`+hash+`"
    grants:
      - {prefix: "", allow: [read, append, subscribe, admin]}
  - name: indexer
    subject: "CN=indexer"
    san: "indexer.example.com"
    grants:
      - {prefix: "tenant-a/", allow: [read, subscribe]}
    quotas: {append_bytes_per_second: 10MiB, append_burst_bytes: 20MiB, logs: 100, subscriptions: 20}
  - name: node-1
    subject: "CN=tern-node-1"
    node: true
`)
	out := must(t, dir, "", "auth", "check", good)
	want := `ops
  authenticates by: token ` + hash[:15] + `…
  grant: read, append, subscribe, admin on every log
indexer
  authenticates by: certificate subject "CN=indexer" or certificate SAN "indexer.example.com"
  grant: read, subscribe on logs under "tenant-a/"
  quotas: append 10MiB/s (burst 20MiB), 100 logs, 20 subscriptions
node-1 (cluster node)
  authenticates by: certificate subject "CN=tern-node-1"
  grants: none
3 principal(s): the file is valid
`
	if out != want {
		t.Errorf("auth check printed\n%s\nwant\n%s", out, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeAuthFile(t, bad, "principals:\n  - name: indexer\n    subject: CN=indexer\n    grants:\n      - {prefix: a/, allow: [read, wirte]}\n")
	fails(t, 1, dir, "", []string{"auth", "check", bad},
		`tern: auth: `+bad+`: line 5: principal "indexer": allow "wirte" is not a permission: use read, append, subscribe or admin`)
	fails(t, 1, dir, "", []string{"auth", "check", filepath.Join(dir, "missing.yaml")}, "missing.yaml", "no such file")
	fails(t, 2, dir, "", []string{"auth", "check"}, "tern auth check needs FILE")
}

func TestAuthUsage(t *testing.T) {
	dir := t.TempDir()
	if out := must(t, dir, "", "auth"); !strings.Contains(out, "hash-token") || !strings.Contains(out, "new-token") {
		t.Errorf("tern auth printed:\n%s", out)
	}
	fails(t, 2, dir, "", []string{"auth", "hash"}, `unknown command "hash" for "tern auth"`)
	fails(t, 2, dir, "", []string{"auth", "new-token", "x"}, "takes no arguments")
	if _, err := os.Stat(filepath.Join(dir, "logs")); err == nil {
		t.Error("tern auth made a data directory")
	}
}

func writeAuthFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
