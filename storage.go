package tern

import (
	"context"
	"fmt"

	"github.com/ternwal/tern/internal/blob"
)

// StorageOptions name the object store of the logs in object mode.
type StorageOptions struct {
	// URL is the store: "s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R"
	// for S3 or an S3-compatible store such as MinIO (HTTPS unless
	// tls=false; ca=FILE to trust other roots, sse=s3 or sse=c for server-side
	// encryption), or "dir:///PATH" for a local directory standing in for
	// one. Empty: no object store.
	URL string
	// The credentials of an S3 store. Empty: the AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN environment variables.
	AccessKey, SecretKey, SessionToken string
	// SSECKey is the 32-byte customer key of SSE-C (sse=c), sent with every
	// request.
	SSECKey []byte
}

// open connects to the store and checks that it refuses to overwrite an
// object (If-None-Match), which fencing a writer relies on. It returns nil
// when no store is named.
func (o StorageOptions) open(ctx context.Context) (blob.Bucket, error) {
	if o.URL == "" {
		return nil, nil
	}
	b, err := blob.OpenURL(ctx, o.URL, blob.S3Options{
		AccessKey: o.AccessKey, SecretKey: o.SecretKey, SessionToken: o.SessionToken, SSECKey: o.SSECKey,
	})
	if err != nil {
		return nil, fmt.Errorf("tern: object store %s: %w", o.URL, err)
	}
	if err := blob.CheckConditional(ctx, b); err != nil {
		b.Close()
		return nil, fmt.Errorf("tern: object store %s: %w", o.URL, err)
	}
	return b, nil
}
