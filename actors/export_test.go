package actors

// PreparedInFlight counts the prepared memories System.Append holds for
// its sona actors (none once every Append returned).
func PreparedInFlight(s *System) int {
	n := 0
	s.prepared.Range(func(any, any) bool { n++; return true })
	return n
}

// Begins reports whether s would begin a step off the mailboxes now.
func Begins(s *System) bool {
	if !s.begin() {
		return false
	}
	s.work.Done()
	return true
}
