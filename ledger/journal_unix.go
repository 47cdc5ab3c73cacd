//go:build unix

package ledger

// journalSupported says whether journals (and so [Fast]) work here.
const journalSupported = true
