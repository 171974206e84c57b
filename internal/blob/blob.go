// Package blob is Tern's access to object storage: one small Bucket
// interface, with implementations for S3-compatible stores (S3, on
// minio-go), a local directory (Dir) and memory (Mem, for tests), and a
// wrapper that injects faults (Faulty). Every implementation passes the
// acceptance suite in package blobtest.
//
// Keys are slash-separated paths relative to the bucket's prefix, such as
// "12/00000003/00000041". Objects are immutable: they are created once, by
// PutIfAbsent, read, listed and deleted, never overwritten.
//
// Every implementation accepts the same keys, so that code tested on Mem
// runs on Dir and S3: a key is UTF-8 without NUL bytes, is not empty, does
// not start or end with a slash, and has no empty, "." or ".." segment.
// Other keys fail with ErrInvalidKey, as does a List prefix that no valid
// key can start with.
package blob

import (
	"context"
	"errors"
)

var (
	// ErrNotFound is returned for an object that does not exist.
	ErrNotFound = errors.New("blob: object not found")
	// ErrExist is returned by PutIfAbsent when an object is already stored
	// at the key: by someone else, or by an earlier attempt of the same PUT
	// whose response was lost. The caller tells them apart by reading it.
	ErrExist = errors.New("blob: object already exists")
	// ErrInvalidKey is returned for a key that breaks the rules in the
	// package comment.
	ErrInvalidKey = errors.New("blob: invalid key")
)

// Info describes a stored object.
type Info struct {
	Key  string
	Size int64
}

// Bucket is a place to store objects. Implementations are safe for
// concurrent use.
type Bucket interface {
	// PutIfAbsent stores data at key, durably, unless an object is stored
	// there already, in which case it fails with ErrExist and changes
	// nothing. The object is the parts of data one after the other, so a
	// caller whose object is in pieces need not gather it first. It is
	// atomic: a reader sees the whole object or none of it. On S3 it is a
	// PUT with If-None-Match: *.
	PutIfAbsent(ctx context.Context, key string, data ...[]byte) error
	// Get returns the whole object, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange reads len(p) bytes of the object from offset off into p and
	// returns how many it read: fewer only when the object ends first, and
	// then with io.EOF (as io.ReaderAt does). ErrNotFound if there is no
	// object.
	GetRange(ctx context.Context, key string, off int64, p []byte) (int, error)
	// Stat describes the object, or fails with ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the object. Deleting an object that does not exist is
	// not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the bucket's resources (not the objects).
	Close() error
}

// ClaimKey is the key of the object by which an installation of Tern (one
// metadata store) claims the prefix of a bucket: package tern writes it,
// and refuses a prefix another installation has claimed.
const ClaimKey = "tern-installation"
