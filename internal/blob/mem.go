package blob

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Mem is a Bucket in memory, for tests. Its zero value is not usable; call
// NewMem.
type Mem struct {
	mu      sync.RWMutex
	objects map[string][]byte
}

// NewMem returns an empty bucket.
func NewMem() *Mem {
	return &Mem{objects: map[string][]byte{}}
}

// PutIfAbsent stores a copy of data: the caller may change data afterwards.
func (m *Mem) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok {
		return fmt.Errorf("%w: %s", ErrExist, key)
	}
	m.objects[key] = slices.Concat(data...)
	return nil
}

// Get returns a copy that the caller owns.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	if err := check(ctx, key); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	data, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return append([]byte{}, data...), nil
}

func (m *Mem) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if err := check(ctx, key); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("blob: get range of %s: negative offset %d", key, off)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	data, ok := m.objects[key]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if off >= int64(len(data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *Mem) Stat(ctx context.Context, key string) (Info, error) {
	if err := check(ctx, key); err != nil {
		return Info{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	data, ok := m.objects[key]
	if !ok {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return Info{Key: key, Size: int64(len(data))}, nil
}

func (m *Mem) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	m.mu.RLock()
	var infos []Info
	for key, data := range m.objects {
		if strings.HasPrefix(key, prefix) {
			infos = append(infos, Info{Key: key, Size: int64(len(data))})
		}
	}
	m.mu.RUnlock()
	sortInfos(infos)
	return infos, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

// Close does nothing: the objects stay readable.
func (m *Mem) Close() error { return nil }

// check returns the error that ends an operation on key before it starts.
func check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return checkKey(key)
}

func sortInfos(infos []Info) {
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
}
