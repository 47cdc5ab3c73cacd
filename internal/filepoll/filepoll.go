// Package filepoll bounds how often a long-running process looks at a file
// that other processes may change (the virtual keys, the project's pause,
// the circuit breakers): a stat per request costs more than the rest of a
// check, and a change seen a few milliseconds later is still seen.
package filepoll

import "time"

// Throttle says when a shared file is due for another look. The zero
// value is always due: every call looks. Not safe for concurrent use; the
// file's owner calls it under its own lock.
type Throttle struct {
	// Every is the longest a change made by another process can go
	// unseen; zero or less looks every time.
	Every time.Duration

	next time.Time
}

// Due reports whether the file should be looked at now; a true answer
// starts a new period.
func (t *Throttle) Due() bool {
	if t.Every <= 0 {
		return true
	}
	now := time.Now()
	if now.Before(t.next) {
		return false
	}
	t.next = now.Add(t.Every)
	return true
}

// Reset makes the next call due, as after this process wrote the file or
// failed to read it.
func (t *Throttle) Reset() { t.next = time.Time{} }
