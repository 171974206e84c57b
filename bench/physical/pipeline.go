package physical

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ternwal/tern/bench/loadgen"
	"github.com/ternwal/tern/internal/quorum"
	"github.com/ternwal/tern/internal/vfs"
)

// Pipeline measures the data path of a quorum log with nothing of Tern's in
// it: the most that nodes on this machine, whose journals share the disk
// under dir, can do. A writer sends records of size bytes over loopback TCP
// to the first of nodes nodes, which passes each on to the others and
// appends it to a file of its own. Every node appends with write and
// group-commits with fdatasync, and answers the count of records it has
// made durable; a record is done once ackQuorum nodes hold it, and the writer
// keeps inFlight records outstanding. The latency is a record's, from its
// send to its quorum.
//
// There is no framing, checksum, metadata or protocol: records have a
// fixed size, and the counts are 8-byte integers. The nodes are goroutines
// of this process, which costs less than a process each. So it is an upper
// bound, as the disk's own figures are, and the CPU it reports is about what
// the path itself costs, most of it in the kernel.
//
// The Variant is "loopback TCP to N files, ack Q". Its MB/s counts each
// record once, as a quorum log's throughput does, while the disk writes it
// nodes times.
func Pipeline(ctx context.Context, dir string, size, nodes, ackQuorum, inFlight int, d time.Duration) (_ *loadgen.Result, err error) {
	if size <= 0 || inFlight <= 0 {
		return nil, fmt.Errorf("physical: pipeline of %d-byte records, %d in flight: want both positive", size, inFlight)
	}
	tracker, err := quorum.NewTracker(quorum.Config{Ensemble: nodes, AckQuorum: ackQuorum}, 0)
	if err != nil {
		return nil, fmt.Errorf("physical: pipeline of %d nodes acknowledging at %d: %w", nodes, ackQuorum, err)
	}
	files := "files"
	if nodes == 1 {
		files = "file"
	}
	variant := fmt.Sprintf("loopback TCP to %d %s, ack %d", nodes, files, ackQuorum)
	p := &pipeline{size: size, tracker: tracker, done: make(chan struct{})}
	defer func() {
		p.stop()
		p.wg.Wait()
		for _, n := range p.nodes {
			removeFile(n.f, &err)
		}
	}()
	// The writer's connection to node 0, then node 0's to each other node.
	wconn, err := p.link()
	if err != nil {
		return nil, measureError(variant, err)
	}
	p.ackTo = wconn.accepted
	from := []net.Conn{wconn.accepted}
	for i := range nodes {
		if i > 0 {
			c, err := p.link()
			if err != nil {
				return nil, measureError(variant, err)
			}
			p.nodes[0].next = append(p.nodes[0].next, c.dialed)
			from = append(from, c.accepted)
		}
		if err := p.addNode(dir); err != nil {
			return nil, measureError(variant, err)
		}
	}
	for i, n := range p.nodes {
		p.wg.Go(func() { p.receive(n, from[i]) })
		p.wg.Go(func() { p.commit(n, from[i]) })
		if i > 0 {
			p.wg.Go(func() { p.followerCounts(i, p.nodes[0].next[i-1]) })
		}
	}

	sent := make([]time.Time, inFlight) // by record number modulo inFlight
	slots := make(chan struct{}, inFlight)
	buf := payload(size)
	m := startMeter()
	p.wg.Go(func() { p.writerAcks(wconn.dialed, sent, slots, m.hist) })
	deadline := time.Now().Add(d)
	var n uint64
	for time.Now().Before(deadline) {
		if err := p.takeSlot(ctx, slots); err != nil {
			return nil, measureError(variant, err)
		}
		sent[n%uint64(inFlight)] = time.Now()
		if _, err := wconn.dialed.Write(buf); err != nil {
			p.fail(err)
			return nil, measureError(variant, p.failure())
		}
		n++
	}
	// Wait for the records in flight, so that the time counts them all.
	for range inFlight {
		if err := p.takeSlot(ctx, slots); err != nil {
			return nil, measureError(variant, err)
		}
	}
	p.stop()
	for _, n := range p.nodes {
		if n.wrapped.Load() {
			m.note(fmt.Sprintf("a file reached %d bytes, and writes went on from its start", n.limit))
		}
	}
	spec := loadgen.Spec{Kind: loadgen.KindAppend, EntryBytes: size, Batch: 1, Producers: 1, InFlight: inFlight, Logs: 1, Duration: d}
	return m.result("disk", variant, spec, int64(n), size), nil
}

// takeSlot waits for a free slot of the records in flight, and fails when
// the pipeline does or ctx is done.
func (p *pipeline) takeSlot(ctx context.Context, slots chan<- struct{}) error {
	select {
	case slots <- struct{}{}:
		return nil
	case <-p.done:
		return p.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pipeline is one Pipeline measurement: its nodes, the durable count each
// has answered, and its end.
type pipeline struct {
	size  int
	nodes []*pipeNode
	ackTo net.Conn // node 0's side of the writer's connection
	wg    sync.WaitGroup

	mu       sync.Mutex
	tracker  *quorum.Tracker // the nodes' durable counts
	acked    uint64          // the quorum's count, sent to the writer
	conns    []net.Conn
	err      error
	stopping bool
	done     chan struct{} // closed by fail or stop
}

// pipeNode is one node's file and commit loop.
type pipeNode struct {
	id      int
	f       *os.File
	limit   int64
	next    []net.Conn // node 0: the connections to the other nodes
	written atomic.Uint64
	wrapped atomic.Bool
	kick    chan struct{} // capacity 1: records were written since the last fdatasync
}

// conns is the two ends of a loopback connection.
type conns struct{ dialed, accepted net.Conn }

// link returns a new loopback connection, which stop closes.
func (p *pipeline) link() (conns, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return conns{}, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		<-ch
		return conns{}, err
	}
	a := <-ch
	if a.err != nil {
		dialed.Close()
		return conns{}, a.err
	}
	p.mu.Lock()
	p.conns = append(p.conns, dialed, a.c)
	p.mu.Unlock()
	return conns{dialed, a.c}, nil
}

// addNode adds a node with a new file in dir.
func (p *pipeline) addNode(dir string) error {
	f, err := os.CreateTemp(dir, "physical-pipeline-*")
	if err != nil {
		return err
	}
	n := &pipeNode{id: len(p.nodes), f: f, limit: int64(max(fileLimit/p.size, 1) * p.size), kick: make(chan struct{}, 1)}
	p.nodes = append(p.nodes, n)
	return nil
}

// receive reads node n's records from c, passes them on to the next nodes
// and writes them to n's file.
func (p *pipeline) receive(n *pipeNode, c net.Conn) {
	defer close(n.kick)
	buf := make([]byte, p.size)
	var off int64
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			p.fail(err)
			return
		}
		for _, next := range n.next {
			if _, err := next.Write(buf); err != nil {
				p.fail(err)
				return
			}
		}
		if off+int64(p.size) > n.limit {
			off = 0
			n.wrapped.Store(true)
		}
		if _, err := n.f.WriteAt(buf, off); err != nil {
			p.fail(err)
			return
		}
		off += int64(p.size)
		n.written.Add(1)
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// commit makes n's written records durable, as many at once as were
// written meanwhile, and answers their count on c (node 0 counts its own).
func (p *pipeline) commit(n *pipeNode, c net.Conn) {
	var b [8]byte
	for range n.kick {
		count := n.written.Load()
		if err := vfs.Datasync(n.f); err != nil {
			p.fail(err)
			return
		}
		if n.id == 0 {
			p.note(0, count)
			continue
		}
		binary.LittleEndian.PutUint64(b[:], count)
		if _, err := c.Write(b[:]); err != nil {
			p.fail(err)
			return
		}
	}
}

// followerCounts reads node i's durable counts, on node 0's side of c.
func (p *pipeline) followerCounts(i int, c net.Conn) {
	var b [8]byte
	for {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			p.fail(err)
			return
		}
		p.note(i, binary.LittleEndian.Uint64(b[:]))
	}
}

// note records that node i holds count records durably, and tells the
// writer when that raises the quorum's count.
func (p *pipeline) note(i int, count uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.tracker.Ack(i, count)
	if err != nil {
		p.failLocked(err)
		return
	}
	if q <= p.acked {
		return
	}
	p.acked = q
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], q)
	// Under p.mu, so that the counts reach the writer in order.
	if _, err := p.ackTo.Write(b[:]); err != nil {
		p.failLocked(err)
	}
}

// writerAcks reads the quorum's counts on the writer's side of c, records
// each record's latency and frees its slot.
func (p *pipeline) writerAcks(c net.Conn, sent []time.Time, slots chan struct{}, h *loadgen.Histogram) {
	var b [8]byte
	var done uint64
	for {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			p.fail(err)
			return
		}
		count := binary.LittleEndian.Uint64(b[:])
		now := time.Now()
		for ; done < count; done++ {
			h.Record(now.Sub(sent[done%uint64(len(sent))]))
			<-slots
		}
	}
}

// fail ends the measurement with err, unless it is already ending.
func (p *pipeline) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLocked(err)
}

func (p *pipeline) failLocked(err error) {
	if p.stopping {
		return // the errors of closed connections
	}
	p.err = err
	p.stopLocked()
}

func (p *pipeline) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return errors.New("the pipeline stopped")
	}
	return p.err
}

// stop ends the measurement: it closes every connection, which ends the
// nodes' goroutines.
func (p *pipeline) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *pipeline) stopLocked() {
	if p.stopping {
		return
	}
	p.stopping = true
	close(p.done)
	for _, c := range p.conns {
		c.Close()
	}
}
