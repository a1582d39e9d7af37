package sim

// LeaveOutEveryLost plants a wrong rule for leaving calls out of the
// history: every call whose outcome a fault hid is left out, as if it
// certainly changed nothing. It returns the function that restores the
// rule. Tests use it to show that the checks catch a wrong rule.
func LeaveOutEveryLost() (restore func()) {
	old := leaveOut
	leaveOut = func(*world, *inflight) bool { return true }
	return func() { leaveOut = old }
}
