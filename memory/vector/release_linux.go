package vector

import (
	"os"
	"syscall"
)

// canRelease: releasePages drops pages here (and snapshots are aligned
// to this machine's pages).
var canRelease = os.Getpagesize() == snapAlign

// releasePages drops the process's pages of b, a part of a private file
// mapping whose pages were never written: they are the file's again,
// from the page cache, when next touched.
func releasePages(b []byte) { syscall.Madvise(b, syscall.MADV_DONTNEED) }
