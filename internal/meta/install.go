package meta

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
)

// Installation is the identity of one metadata store: created once, with
// the store, and the same for every process that shares it. It tells this
// store's data from another's where both can meet, as under one object-store
// prefix.
type Installation struct {
	// ID is 26 characters of A-Z and 2-7 (128 random bits, base32): a valid
	// object-key segment that no log ID (decimal) can be.
	ID      string
	Created time.Time // when it was stored, to the microsecond
}

// newInstallation returns a new installation with a random ID.
func newInstallation() Installation {
	return Installation{ID: rand.Text(), Created: time.Now().UTC().Truncate(time.Microsecond)}
}

// The install record is a JSON object, version 1:
//
//	{"v":1,"id":"MB3HYQ6N2T5WJQKUXA7VCZ4L2E","created_us":1700000000000000}
//
//	v           record version, always 1; any other value is rejected
//	id          Installation.ID
//	created_us  Installation.Created as microseconds since the Unix epoch
//
// It is written once, if absent, and never changed.
type installRecord struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	CreatedUS int64  `json:"created_us"`
}

func encodeInstallation(in Installation) []byte {
	v, err := json.Marshal(installRecord{V: recordVersion, ID: in.ID, CreatedUS: in.Created.UnixMicro()})
	if err != nil {
		panic(fmt.Sprintf("meta: encode installation: %v", err)) // plain fields always encode
	}
	return v
}

func decodeInstallation(v []byte) (Installation, error) {
	var r installRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Installation{}, fmt.Errorf("decode install record: %w", err)
	}
	if r.V != recordVersion {
		return Installation{}, fmt.Errorf("decode install record: unsupported version %d", r.V)
	}
	if r.ID == "" {
		return Installation{}, fmt.Errorf("decode install record: no id")
	}
	return Installation{ID: r.ID, Created: time.UnixMicro(r.CreatedUS).UTC()}, nil
}
