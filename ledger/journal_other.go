//go:build !unix

package ledger

const journalSupported = false
