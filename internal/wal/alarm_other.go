//go:build !linux

package wal

import (
	"errors"
	"time"
)

// alarm is Linux's (a timerfd); elsewhere a gather's runtime timer alone
// ends its wait.
type alarm struct{}

var errNoAlarm = errors.New("wal: no alarm on this system")

func newAlarm(chan struct{}) (*alarm, error) { return nil, errNoAlarm }

func (*alarm) set(time.Duration) {}
func (*alarm) stop()             {}
func (*alarm) close()            {}
