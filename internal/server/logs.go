package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/rpcerr"
	"github.com/ternwal/tern/client/ternpb"
)

// CreateLog creates a log.
func (s *Server) CreateLog(ctx context.Context, req *ternpb.CreateLogRequest) (*ternpb.LogInfo, error) {
	opts, err := tern.LogOptionsFromProto(req.GetOptions())
	if err != nil {
		return nil, wire(err)
	}
	if s.node != nil && opts.Mode == tern.ModeLocal {
		return nil, wire(fmt.Errorf("%w: a local log lives on one node's disk, and the logs of a cluster move between its nodes: create it in mode quorum or object", tern.ErrInvalid))
	}
	info, err := s.create(ctx, req.GetName(), opts)
	if err != nil {
		return nil, wire(err)
	}
	if err := s.route(ctx, req.GetName()); errors.Is(err, rpcerr.ErrNotOwner) {
		s.c.CloseLog(req.GetName()) // another node serves it
	}
	return logInfoProto(info), nil
}

// create creates a log and describes it from the handle CreateLog opened.
// A take, by a call or by the balance loop's adopt, closes the handle of the
// log it takes (it may be stale) once the log is in the metadata: takeMu
// keeps every take out until the new log is described.
func (s *Server) create(ctx context.Context, name string, opts tern.LogOptions) (tern.LogInfo, error) {
	s.takeMu.Lock()
	defer s.takeMu.Unlock()
	l, err := s.c.CreateLog(ctx, name, opts)
	if err != nil {
		return tern.LogInfo{}, err
	}
	return l.Info(ctx)
}

// DescribeLog describes a log as it is now.
func (s *Server) DescribeLog(ctx context.Context, req *ternpb.DescribeLogRequest) (*ternpb.LogInfo, error) {
	l, err := s.open(ctx, req.GetName())
	if err != nil {
		return nil, wire(err)
	}
	info, err := l.Info(ctx)
	if err != nil {
		return nil, wire(err)
	}
	return logInfoProto(info), nil
}

// ListLogs describes a page of the logs whose names start with the prefix,
// from the metadata, opening none (tern.Client.ListLogsPage): a log the
// server has open is described in full, any other with its End at its
// Start and no Bytes, Segments or Objects. A node of a cluster lists every
// log, the ones other nodes serve too. With an auth file, it lists only
// the logs the caller may read.
func (s *Server) ListLogs(ctx context.Context, req *ternpb.ListLogsRequest) (*ternpb.ListLogsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, wire(fmt.Errorf("%w: page size %d is negative", tern.ErrInvalid, req.GetPageSize()))
	}
	who, _ := callerFrom(ctx)
	page, err := s.listReadable(ctx, who, req.GetPrefix(), req.GetPageToken(), int(req.GetPageSize()))
	if err != nil {
		return nil, wire(err)
	}
	resp := &ternpb.ListLogsResponse{Logs: make([]*ternpb.LogInfo, len(page.Logs)), NextPageToken: page.NextPageToken}
	for i, info := range page.Logs {
		resp.Logs[i] = logInfoProto(info)
	}
	return resp, nil
}

// DeleteLog deletes a log and its data, and drops the Server's writers of it.
func (s *Server) DeleteLog(ctx context.Context, req *ternpb.DeleteLogRequest) (*ternpb.DeleteLogResponse, error) {
	if err := s.route(ctx, req.GetName()); err != nil {
		return nil, wire(err)
	}
	if err := s.c.DeleteLog(ctx, req.GetName()); err != nil {
		return nil, wire(err)
	}
	s.dropWriters(req.GetName(), fmt.Errorf("%w: log %q was deleted", tern.ErrClosed, req.GetName()))
	s.forget(ctx, req.GetName())
	return &ternpb.DeleteLogResponse{}, nil
}

// TruncateLog moves the log's start up to before.
func (s *Server) TruncateLog(ctx context.Context, req *ternpb.TruncateLogRequest) (*ternpb.TruncateLogResponse, error) {
	l, err := s.open(ctx, req.GetName())
	if err != nil {
		return nil, wire(err)
	}
	if err := l.Truncate(ctx, tern.Offset(req.GetBefore())); err != nil {
		return nil, wire(err)
	}
	return &ternpb.TruncateLogResponse{}, nil
}

func logInfoProto(info tern.LogInfo) *ternpb.LogInfo {
	return &ternpb.LogInfo{
		Name:            info.Name,
		Id:              info.ID,
		CreatedUnixNano: info.Created.UnixNano(),
		Options:         info.Options.Proto(),
		Start:           uint64(info.Start),
		End:             uint64(info.End),
		Bytes:           info.Bytes,
		Segments:        int64(info.Segments),
		Epoch:           info.Epoch,
		Objects:         int64(info.Objects),
		ExtentUnknown:   info.ExtentUnknown,
		LogicalBytes:    info.LogicalBytes,
	}
}
