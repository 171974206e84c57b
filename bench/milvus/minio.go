package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// bucket creates the named bucket in the MinIO (if missing) and returns the
// Tern storage URL of a prefix in it.
func (e *env) bucket(ctx context.Context, name string) (string, error) {
	if e.minio.Endpoint == "" {
		return "", errors.New("the object and quorum systems need a MinIO: --minio HOST:PORT, with its credentials in $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY")
	}
	c, err := minio.New(e.minio.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(e.minio.AccessKey, e.minio.Secret, "")})
	if err != nil {
		return "", err
	}
	ok, err := c.BucketExists(ctx, name)
	if err != nil {
		return "", fmt.Errorf("MinIO at %s: %w", e.minio.Endpoint, err)
	}
	if !ok {
		if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
			return "", fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return fmt.Sprintf("s3://%s/bench?endpoint=%s&tls=false", name, e.minio.Endpoint), nil
}
