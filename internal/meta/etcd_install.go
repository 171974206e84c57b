package meta

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (e *Etcd) installKey() string { return e.root + "installation" }

// Installation implements Store: a transaction puts a new record if the key
// has none and reads the stored one otherwise, so every store on the same
// root gets the record of the first transaction.
func (e *Etcd) Installation(ctx context.Context) (Installation, error) {
	if err := ctx.Err(); err != nil {
		return Installation{}, err
	}
	key := e.installKey()
	resp, err := e.cli.Get(ctx, key)
	if err == nil && len(resp.Kvs) > 0 {
		return decodeStoredInstallation(key, resp.Kvs[0].Value)
	}
	if err != nil {
		return Installation{}, fmt.Errorf("meta: installation: %w", err)
	}
	in := newInstallation()
	txn, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(encodeInstallation(in)))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return Installation{}, fmt.Errorf("meta: installation: %w", err)
	}
	if txn.Succeeded {
		return in, nil
	}
	kv := first(txn, 0)
	if kv == nil {
		return Installation{}, fmt.Errorf("meta: installation: %s vanished", key) // it is never deleted
	}
	return decodeStoredInstallation(key, kv.Value)
}

func decodeStoredInstallation(key string, v []byte) (Installation, error) {
	in, err := decodeInstallation(v)
	if err != nil {
		return Installation{}, fmt.Errorf("meta: installation: %s: %w", key, err)
	}
	return in, nil
}
