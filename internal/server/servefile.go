package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ServeFile is the name of the file, in the data directory, that says which
// tern serve has the directory open and where it listens, for the CLI's
// error when it finds the directory locked. It is written once the server
// listens and removed when it stops; a server killed leaves it, but then
// the directory is no longer locked and nothing reads it.
const ServeFile = "serve.json"

// ServeInfo is the content of ServeFile, a JSON object.
type ServeInfo struct {
	PID  int    `json:"pid"`
	Addr string `json:"addr"` // the address to dial: host:port
	TLS  bool   `json:"tls"`
}

// writeServeFile writes info into dir's ServeFile, replacing it whole.
func writeServeFile(dir string, info ServeInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ServeFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadServeFile reads dir's ServeFile; ok is false when there is none, or
// it cannot be read as one.
func ReadServeFile(dir string) (info ServeInfo, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, ServeFile))
	if err != nil || json.Unmarshal(b, &info) != nil || info.Addr == "" {
		return ServeInfo{}, false
	}
	return info, true
}

func removeServeFile(dir string) error {
	err := os.Remove(filepath.Join(dir, ServeFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
