//go:build !linux

package wal

import (
	"errors"
	"time"
)

// alarm is Linux's (a timerfd); elsewhere a gather's runtime timer alone
// ends its wait.
type alarm struct{}

func newAlarm(chan struct{}) (*alarm, error) {
	return nil, errors.New("wal: no alarm on this system")
}

func (*alarm) set(time.Duration) {}
func (*alarm) stop()             {}
func (*alarm) close()            {}
