package tern

import (
	"github.com/ternwal/tern/client"
	"github.com/ternwal/tern/client/ternpb"
)

// The types of the API are the client module's: a value made for one
// works with the other.
type (
	// Offset is the position of an entry in its log: dense, from 0, never
	// reused.
	Offset = client.Offset
	// Entry is one entry of a log.
	Entry = client.Entry
	// LogInfo describes a log.
	LogInfo = client.LogInfo
	// LogPage is one page of ListLogsPage.
	LogPage = client.LogPage
	// LogOptions are a log's settings, fixed when it is created.
	LogOptions = client.LogOptions
	// Fsync is a log's durability setting; see client.Fsync.
	Fsync = client.Fsync
	// FsyncMode says when an append is acknowledged.
	FsyncMode = client.FsyncMode
	// Mode is where a log keeps its entries, chosen when it is created.
	Mode = client.Mode
	// SubOptions configure a new subscription.
	SubOptions = client.SubOptions
	// SubInfo describes a subscription.
	SubInfo = client.SubInfo
	// ReadOption changes how a Reader or Subscriber reads.
	ReadOption = client.ReadOption
)

// The fsync modes, the modes and the defaults of LogOptions; see package
// client for what each means.
const (
	FsyncAlways   = client.FsyncAlways
	FsyncInterval = client.FsyncInterval // UNSAFE
	FsyncNever    = client.FsyncNever    // UNSAFE

	ModeLocal  = client.ModeLocal
	ModeObject = client.ModeObject
	ModeQuorum = client.ModeQuorum

	DefaultSegmentBytes    = client.DefaultSegmentBytes
	DefaultSegmentAge      = client.DefaultSegmentAge
	DefaultMaxEntryBytes   = client.DefaultMaxEntryBytes
	DefaultFlushBytes      = client.DefaultFlushBytes
	DefaultFlushInterval   = client.DefaultFlushInterval
	DefaultUploadsInFlight = client.DefaultUploadsInFlight
	MaxBatchBytes          = client.MaxBatchBytes
	DefaultListPageSize    = client.DefaultListPageSize
	MaxListPageSize        = client.MaxListPageSize
	MaxNameBytes           = client.MaxNameBytes

	// FromStart and FromEnd are where OpenReader may start besides an
	// offset: the log's start, or its end, as they are when it opens.
	FromStart = client.FromStart
	FromEnd   = client.FromEnd
)

// ParseFsync parses the text form of an Fsync: "always", "never" or
// "interval:<duration>".
func ParseFsync(s string) (Fsync, error) { return client.ParseFsync(s) }

// ParseMode parses a mode's name; "" is the client's default.
func ParseMode(s string) (Mode, error) { return client.ParseMode(s) }

// ValidateName reports whether name can name a log.
func ValidateName(name string) error { return client.ValidateName(name) }

// ValidateSubName reports whether name can name a subscription.
func ValidateSubName(name string) error { return client.ValidateSubName(name) }

// LogOptionsFromProto reads log options in the form of the gRPC API.
func LogOptionsFromProto(p *ternpb.LogOptions) (LogOptions, error) {
	return client.LogOptionsFromProto(p)
}

// WithTicks makes the Reader or Subscriber return, besides entries, the time
// ticks appended while it is open, each in its place between the entries:
// an Entry with IsTick set. See Writer.AppendTimeTick.
func WithTicks() ReadOption { return client.WithTicks() }

// WithMaxBatchBytes makes NextBatch return at most about n bytes of entries
// (payloads plus property keys and values), or a single entry larger than
// n: a reader that holds each batch it gets holds about n bytes however
// many entries it asks for. n <= 0 is no bound, the default.
func WithMaxBatchBytes(n int) ReadOption { return client.WithMaxBatchBytes(n) }

// WithReconnectNotify makes a Reader or Subscriber of a server's log call f
// when its stream breaks and it starts reconnecting (the server restarts,
// the log moves to another node), with the error that broke it, and again,
// with nil, once it has reconnected. f runs in the goroutine that called
// Next or NextBatch and must not call the Reader or Subscriber. An
// embedded Reader never reconnects, and never calls f.
func WithReconnectNotify(f func(err error)) ReadOption { return client.WithReconnectNotify(f) }
