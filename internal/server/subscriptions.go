package server

import (
	"context"

	"github.com/ternwal/tern"
	"github.com/ternwal/tern/client/ternpb"
)

// CreateSubscription creates a durable subscription on a log.
func (s *Server) CreateSubscription(ctx context.Context, req *ternpb.CreateSubscriptionRequest) (*ternpb.SubscriptionInfo, error) {
	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return nil, wire(err)
	}
	info, err := l.CreateSubscription(ctx, req.GetName(), tern.SubOptions{
		From:    tern.Offset(req.GetFrom()),
		FromEnd: req.GetFromEnd(),
		Pin:     req.GetPin(),
	})
	if err != nil {
		return nil, wire(err)
	}
	return subInfoProto(info), nil
}

// DescribeSubscription describes a subscription, with its lag as of now.
func (s *Server) DescribeSubscription(ctx context.Context, req *ternpb.DescribeSubscriptionRequest) (*ternpb.SubscriptionInfo, error) {
	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return nil, wire(err)
	}
	info, err := l.Subscription(ctx, req.GetName())
	if err != nil {
		return nil, wire(err)
	}
	return subInfoProto(info), nil
}

// ListSubscriptions describes a log's subscriptions, by name.
func (s *Server) ListSubscriptions(ctx context.Context, req *ternpb.ListSubscriptionsRequest) (*ternpb.ListSubscriptionsResponse, error) {
	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return nil, wire(err)
	}
	infos, err := l.Subscriptions(ctx)
	if err != nil {
		return nil, wire(err)
	}
	resp := &ternpb.ListSubscriptionsResponse{Subscriptions: make([]*ternpb.SubscriptionInfo, len(infos))}
	for i, info := range infos {
		resp.Subscriptions[i] = subInfoProto(info)
	}
	return resp, nil
}

// DeleteSubscription deletes a subscription; its subscriber's stream ends.
func (s *Server) DeleteSubscription(ctx context.Context, req *ternpb.DeleteSubscriptionRequest) (*ternpb.DeleteSubscriptionResponse, error) {
	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return nil, wire(err)
	}
	if err := l.DeleteSubscription(ctx, req.GetName()); err != nil {
		return nil, wire(err)
	}
	return &ternpb.DeleteSubscriptionResponse{}, nil
}

// Seek moves a subscription's cursor.
func (s *Server) Seek(ctx context.Context, req *ternpb.SeekRequest) (*ternpb.SeekResponse, error) {
	l, err := s.open(ctx, req.GetLog())
	if err != nil {
		return nil, wire(err)
	}
	if err := l.Seek(ctx, req.GetName(), tern.Offset(req.GetTo())); err != nil {
		return nil, wire(err)
	}
	return &ternpb.SeekResponse{}, nil
}

func subInfoProto(info tern.SubInfo) *ternpb.SubscriptionInfo {
	return &ternpb.SubscriptionInfo{
		Log:             info.Log,
		Name:            info.Name,
		CreatedUnixNano: info.Created.UnixNano(),
		Cursor:          uint64(info.Cursor),
		Pin:             info.Pin,
		Lag:             info.Lag,
	}
}
