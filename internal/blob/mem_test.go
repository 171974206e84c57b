package blob_test

import (
	"testing"

	"github.com/ternwal/tern/internal/blob"
	"github.com/ternwal/tern/internal/blob/blobtest"
)

func TestMem(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return blob.NewMem() })
}
