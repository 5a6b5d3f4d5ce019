package memory

// StoreVersion is the layout version of the key spaces in doc.go. A store
// written by a newer layout is refused.
const StoreVersion = 3

var keyVersion = []byte("x/version")
