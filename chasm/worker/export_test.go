package worker

// BeginRecountForTest and EndRecountForTest run a recount's two halves around a test's own
// transitions.
func BeginRecountForTest(c *StateCounts) { c.beginRecount() }

func EndRecountForTest(c *StateCounts, counted map[string]StateCount, ok bool) {
	c.endRecount(counted, ok)
}
