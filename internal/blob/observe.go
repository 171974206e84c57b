package blob

import (
	"context"
	"time"
)

// Observe returns b, reporting each request to fn once it returns: its
// operation (OpPut, ...; GetRange is OpGetRange), how long it took and its
// error (ErrNotFound and ErrExist included: the caller tells answers from
// failures). fn must be cheap and safe for concurrent use (a metric).
// Closing the result closes b.
func Observe(b Bucket, fn func(op Op, d time.Duration, err error)) Bucket {
	return observed{b, fn}
}

type observed struct {
	b  Bucket
	fn func(op Op, d time.Duration, err error)
}

func (o observed) report(op Op, start time.Time, err error) { o.fn(op, time.Since(start), err) }

func (o observed) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	start := time.Now()
	err := o.b.PutIfAbsent(ctx, key, data...)
	o.report(OpPut, start, err)
	return err
}

func (o observed) Get(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	data, err := o.b.Get(ctx, key)
	o.report(OpGet, start, err)
	return data, err
}

func (o observed) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	start := time.Now()
	n, err := o.b.GetRange(ctx, key, off, p)
	o.report(OpGetRange, start, err)
	return n, err
}

func (o observed) Stat(ctx context.Context, key string) (Info, error) {
	start := time.Now()
	info, err := o.b.Stat(ctx, key)
	o.report(OpStat, start, err)
	return info, err
}

func (o observed) List(ctx context.Context, prefix string) ([]Info, error) {
	start := time.Now()
	infos, err := o.b.List(ctx, prefix)
	o.report(OpList, start, err)
	return infos, err
}

func (o observed) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := o.b.Delete(ctx, key)
	o.report(OpDelete, start, err)
	return err
}

func (o observed) Close() error { return o.b.Close() }
