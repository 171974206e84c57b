package tern

import "testing"

// embeddedOf is the embedded implementation behind c, for the tests that
// look inside it.
func embeddedOf(c *Client) *embeddedClient { return c.impl.(*embeddedClient) }

// logOf is the embedded log behind l.
func logOf(l *Log) *embeddedLog { return l.impl.(*embeddedLog) }

// applyRetention applies l's retention now, opening it if it is idle.
func applyRetention(t testing.TB, l *embeddedLog) error {
	t.Helper()
	eng, release, err := l.acquire(t.Context())
	if err != nil {
		return err
	}
	defer release()
	return l.applyRetention(eng)
}
