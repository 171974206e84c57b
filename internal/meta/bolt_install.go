package meta

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var (
	installBucket = []byte("installation")
	installKey    = []byte("id")
)

// Installation implements Store. The record is read, and written if absent,
// in one read-write transaction, which the file lock makes the only one.
func (b *Bolt) Installation(ctx context.Context) (Installation, error) {
	if err := ctx.Err(); err != nil {
		return Installation{}, err
	}
	var in Installation
	var found bool
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(installBucket)
		if bk == nil {
			return nil
		}
		v := bk.Get(installKey)
		if v == nil {
			return nil
		}
		var err error
		in, err = decodeInstallation(v)
		found = err == nil
		return err
	})
	if err == nil && !found {
		err = b.db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists(installBucket)
			if err != nil {
				return err
			}
			if v := bk.Get(installKey); v != nil {
				in, err = decodeInstallation(v)
				return err
			}
			in = newInstallation()
			return bk.Put(installKey, encodeInstallation(in))
		})
	}
	if err != nil {
		return Installation{}, fmt.Errorf("meta: installation: %w", err)
	}
	return in, nil
}
