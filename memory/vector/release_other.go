//go:build !linux

package vector

// canRelease: releasePages does nothing here (MADV_DONTNEED is Linux's;
// elsewhere it need not drop a private mapping's pages).
const canRelease = false

func releasePages([]byte) {}
