package milvus

import (
	"fmt"

	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls"
	"github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/helper"
)

// DefaultReadAheadBufferSize is the read-ahead of a scanner whose
// ReadOption.ReadAheadBufferSize is 0.
const DefaultReadAheadBufferSize = 1024

// scanner delivers a reader's entries as Milvus messages. One goroutine
// (run) reads and sends; it ends on Close, or on the reader's error, which
// Error returns.
type scanner struct {
	*helper.ScannerHelper
	log string
	r   reader
	ch  chan message.ImmutableMessage
}

var _ walimpls.ScannerImpls = (*scanner)(nil)

// newScanner starts delivering r's entries. The messages read ahead, in the
// channel and in the batch being sent, stay below readAhead: each batch
// asks for no more than the channel has room for. (A remote reader also
// buffers what its stream received, as gRPC's flow control lets it.)
func newScanner(name, log string, r reader, readAhead int) *scanner {
	if readAhead <= 0 {
		readAhead = DefaultReadAheadBufferSize
	}
	s := &scanner{
		ScannerHelper: helper.NewScannerHelper(name),
		log:           log,
		r:             r,
		ch:            make(chan message.ImmutableMessage, readAhead),
	}
	go s.run()
	return s
}

func (s *scanner) Chan() <-chan message.ImmutableMessage { return s.ch }

func (s *scanner) run() {
	err := s.deliver()
	s.r.Close()
	close(s.ch)
	s.Finish(err)
}

// deliver sends entries until the scanner is closed (nil) or the reader
// fails (its error).
func (s *scanner) deliver() error {
	ctx := s.Context()
	for {
		es, err := s.r.NextBatch(ctx, max(1, cap(s.ch)-len(s.ch)))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tern wal: scanner %s of log %s: %w", s.Name(), s.log, err)
		}
		for _, e := range es {
			if e.IsTick {
				continue
			}
			select {
			case s.ch <- immutable(e):
			case <-ctx.Done():
				return nil
			}
		}
	}
}
