package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// CheckConditional checks that b honours PutIfAbsent: it puts a probe
// object under "_tern/" twice and expects the second put to fail with
// ErrExist and leave the first content. Some S3-compatible stores ignore
// If-None-Match and overwrite instead; Tern fences writers with
// PutIfAbsent, so it must not run on them. The probe is deleted before
// CheckConditional returns, unless deleting fails.
func CheckConditional(ctx context.Context, b Bucket) (err error) {
	key := "_tern/probe-" + rand.Text()
	first, second := []byte("first "+key), []byte("second "+key)
	if err := b.PutIfAbsent(ctx, key, first); err != nil {
		return fmt.Errorf("blob: check conditional puts: put probe %s: %w", key, err)
	}
	defer func() {
		if derr := b.Delete(ctx, key); derr != nil && err == nil {
			err = fmt.Errorf("blob: check conditional puts: delete probe %s: %w", key, derr)
		}
	}()
	err = b.PutIfAbsent(ctx, key, second)
	switch {
	case err == nil:
		return fmt.Errorf("blob: the object store ignores If-None-Match: a second conditional put of %s succeeded; "+
			"Tern cannot fence writers on this store, and refuses to run rather than run unsafely", key)
	case !errors.Is(err, ErrExist):
		return fmt.Errorf("blob: check conditional puts: second put of probe %s: %w", key, err)
	}
	got, err := b.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("blob: check conditional puts: get probe %s: %w", key, err)
	}
	if !bytes.Equal(got, first) {
		return fmt.Errorf("blob: the object store overwrote %s although it reported the second conditional put as failed; "+
			"Tern cannot fence writers on this store, and refuses to run rather than run unsafely", key)
	}
	return nil
}
