//go:build !unix

package vfs

import "errors"

func (osFS) space(string) (Space, error) {
	return Space{}, errors.New("vfs: free space is not known on this platform")
}
