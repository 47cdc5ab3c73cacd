package ledger

// JournalSettleLine is the journal line (without its newline) of a
// settlement, as [Fast] writes it.
func JournalSettleLine(s Settlement) []byte {
	return appendRecord(nil, record{Op: "settle", Settle: &s})
}
