package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// A byte flipped in the middle of a log's open segment after a kill -9
// keeps the damage in that log: the server starts, the other log takes
// appends, tern log list works, the damaged log reads up to the damage and
// refuses appends with DATA_LOSS naming the file and byte, /readyz stays
// 200 and names it, tern_logs_degraded counts it; tern log repair shows the
// cut, and with --accept-loss makes it, after which the log takes appends
// and everything acknowledged before the damage is there.
func TestDamagedOpenSegmentAfterKill9(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	c := openClient(t, srv.addr)
	ctx := deadline(t)
	const n = 60
	ids := map[string]uint64{}
	for _, name := range []string{"bad", "good"} {
		l, err := c.CreateLog(ctx, name, tern.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.OpenWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n { // one acknowledged batch each
			if off, err := w.Append(ctx, tern.Entry{Payload: payloadOf(name, i)}); err != nil || off != tern.Offset(i) {
				t.Fatalf("append %d to %s: %d, %v", i, name, off, err)
			}
		}
		info, err := l.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = info.ID
	}
	srv.kill9()

	segs, err := filepath.Glob(filepath.Join(data, "logs", strconv.FormatUint(ids["bad"], 10), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments of bad: %v, %v", segs, err)
	}
	seg := segs[0]
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	flipAt(t, seg, st.Size()/2) // about 30 whole batches follow: no torn tail

	srv.restart()
	c = openClient(t, srv.addr)
	out, err := ternCmd("log", "list", "--server", srv.addr)
	if err != nil || !strings.Contains(out, "bad") || !strings.Contains(out, "good") {
		t.Fatalf("tern log list --server beside a degraded log: %v\n%s", err, out)
	}

	bad, err := c.OpenLog(ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	info, err := bad.Info(ctx)
	if err != nil || info.End == 0 || info.End >= n {
		t.Fatalf("the degraded log: %+v, %v; want it to end before the damage", info, err)
	}
	for i, e := range readAll(t, bad, 0, info.End) {
		if string(e.Payload) != string(payloadOf("bad", i)) {
			t.Fatalf("offset %d of the degraded log holds %q", i, e.Payload)
		}
	}
	w, err := bad.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Append(ctx, tern.Entry{Payload: []byte("refused")})
	if !errors.Is(err, tern.ErrDamaged) || !strings.Contains(err.Error(), seg+" is corrupt at byte ") {
		t.Fatalf("append to the degraded log: %v, want ErrDamaged naming %s and the byte", err, seg)
	}
	// On the wire: DATA_LOSS, naming the file and byte.
	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := ternpb.NewTernClient(conn)
	ow, err := api.OpenWriter(ctx, &ternpb.OpenWriterRequest{Log: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.Append(ctx, &ternpb.AppendRequest{Log: "bad", Epoch: ow.GetEpoch(), Entries: []*ternpb.Entry{{Payload: []byte("refused")}}})
	if st := status.Convert(err); st.Code() != codes.DataLoss || !strings.Contains(st.Message(), seg+" is corrupt at byte ") {
		t.Fatalf("raw append to the degraded log: %v, want DATA_LOSS naming %s and the byte", err, seg)
	}
	if w, err = bad.OpenWriter(ctx); err != nil { // the raw writer fenced the first
		t.Fatal(err)
	}

	good, err := c.OpenLog(ctx, "good")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := good.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if off, err := gw.Append(ctx, tern.Entry{Payload: payloadOf("good", n)}); err != nil || off != n {
		t.Fatalf("append to the other log: %d, %v", off, err)
	}

	code, body := httpGet(t, srv.httpAddr, "/readyz")
	if code != http.StatusOK || !strings.Contains(body, `degraded log "bad"`) || !strings.Contains(body, seg) {
		t.Fatalf("/readyz: %d\n%s", code, body)
	}
	if _, body := httpGet(t, srv.httpAddr, "/metrics"); !strings.Contains(body, "\ntern_logs_degraded 1\n") {
		t.Fatalf("/metrics lacks tern_logs_degraded 1")
	}
	if got := strings.Count(srv.stderr.String(), "log is damaged: its entries up to the damage"); got != 1 {
		t.Fatalf("the server logged the damage %d times, want once", got)
	}

	out, err = ternCmd("log", "repair", "bad", "--server", srv.addr)
	if err != nil || !strings.Contains(out, `log "bad" is damaged: `+seg+" is corrupt at byte ") || !strings.Contains(out, "would cut") ||
		!strings.Contains(out, fmt.Sprintf("the entries below offset %d", info.End)) {
		t.Fatalf("tern log repair (dry run): %v\n%s", err, out)
	}
	if after, _ := os.Stat(seg); after.Size() != st.Size() {
		t.Fatalf("the dry run changed the segment from %d to %d bytes", st.Size(), after.Size())
	}
	out, err = ternCmd("log", "repair", "bad", "--accept-loss", "--server", srv.addr)
	if err != nil || !strings.Contains(out, fmt.Sprintf("repaired: the log ends at offset %d", info.End)) {
		t.Fatalf("tern log repair --accept-loss: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(seg), "repairs")); err != nil || !strings.Contains(string(b), "cut "+seg) {
		t.Fatalf("the record of the repair: %q, %v", b, err)
	}

	if off, err := w.Append(ctx, tern.Entry{Payload: payloadOf("bad", int(info.End))}); err != nil || off != info.End {
		t.Fatalf("append after the repair: %d, %v; want offset %d", off, err, info.End)
	}
	for i, e := range readAll(t, bad, 0, info.End+1) {
		if string(e.Payload) != string(payloadOf("bad", i)) {
			t.Fatalf("offset %d after the repair holds %q", i, e.Payload)
		}
	}
	if code, body := httpGet(t, srv.httpAddr, "/readyz"); code != http.StatusOK || strings.Contains(body, "degraded") {
		t.Fatalf("/readyz after the repair: %d\n%s", code, body)
	}
}

func payloadOf(log string, i int) []byte {
	return fmt.Appendf(nil, "%s-%04d-%s", log, i, strings.Repeat("p", 40))
}

// flipAt flips a bit of the byte at off of the file at path.
func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ternCmd runs the tern binary and returns its stdout and stderr.
func ternCmd(args ...string) (string, error) {
	out, err := exec.Command(ternBin, args...).CombinedOutput()
	return string(out), err
}

// httpGet returns the status and body of a GET of path on the HTTP
// listener at addr.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
