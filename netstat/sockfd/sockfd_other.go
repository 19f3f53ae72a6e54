//go:build !linux

package sockfd

import "fmt"

// Iterator is the task_file iterator, which only Linux has.
type Iterator struct{}

// Open fails: only Linux has the iterator.
func Open(proto bool) (*Iterator, error) {
	return nil, fmt.Errorf("%w: not Linux", ErrUnavailable)
}

// Close does nothing.
func (it *Iterator) Close() error { return nil }

// Each does nothing.
func (it *Iterator) Each(fn func(FD) bool) error { return nil }
