package analyzer

import (
	"testing"
	"unsafe"
)

// TestCloseWaitRecordSize: the tracker's record of a CLOSE_WAIT socket
// fits the 128-byte size class (20,000 of them: 2.6 MB, not 3.2 in 160).
func TestCloseWaitRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(cwSocket{}); n > 128 {
		t.Errorf("cwSocket takes %d bytes, want at most 128 (a size class)", n)
	}
}
