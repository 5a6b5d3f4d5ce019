package actors

// PreparedInFlight counts the prepared memories System.Append holds for
// its sona actors (none once every Append returned).
func PreparedInFlight(s *System) int {
	n := 0
	s.prepared.Range(func(any, any) bool { n++; return true })
	return n
}
