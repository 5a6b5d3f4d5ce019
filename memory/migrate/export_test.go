package migrate

// SetPackBatch has v3 read n records a transaction until the test ends.
func SetPackBatch(n int) (restore func()) {
	old := packBatch
	packBatch = n
	return func() { packBatch = old }
}
