package tern

// embeddedOf is the embedded implementation behind c, for the tests that
// look inside it.
func embeddedOf(c *Client) *embeddedClient { return c.impl.(*embeddedClient) }

// logOf is the embedded log behind l.
func logOf(l *Log) *embeddedLog { return l.impl.(*embeddedLog) }
