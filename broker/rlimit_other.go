//go:build !linux && !darwin

package broker

// openFileLimit cannot read the open-file limit here: 0 says so.
func openFileLimit() uint64 { return 0 }
