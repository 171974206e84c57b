package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ternwal/tern/client/rpcerr"
)

// The status table of docs/server.md is rpcerr's table, row for row, in the
// same order: the codes an operator reads are the codes the server sends.
func TestStatusTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| `([A-Z_]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1]+" "+m[2])
	}
	var table []string
	for _, m := range rpcerr.Table() {
		table = append(table, strings.ToUpper(codeName(m.Code.String()))+" "+m.Reason)
	}
	if strings.Join(documented, "\n") != strings.Join(table, "\n") {
		t.Errorf("docs/server.md's status table:\n%s\n\nrpcerr's table:\n%s", strings.Join(documented, "\n"), strings.Join(table, "\n"))
	}
}

// codeName is a gRPC code as the protocol spells it: FailedPrecondition is
// FAILED_PRECONDITION.
func codeName(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && 'A' <= r && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
