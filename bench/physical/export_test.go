package physical

// SetFileLimit makes the disk measurements' files hold at most n bytes
// until the returned func restores MaxFileBytes.
func SetFileLimit(n int) (restore func()) {
	fileLimit = n
	return func() { fileLimit = MaxFileBytes }
}
