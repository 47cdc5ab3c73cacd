package ledger

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxHostIDLen is the most characters (runes) of a host's session or agent
// id a ledger row keeps (see [AttemptRow.Session]).
const MaxHostIDLen = 200

// CheckHostID reports whether v can be recorded as a host's session or
// agent id as it is: empty, or 1 to [MaxHostIDLen] printable characters
// of valid UTF-8. The error (wrapping [ErrInvalid]) says what is wrong
// without quoting more than the start of v. Callers that take the id from
// a client (the gateway, from a request header) check it with this; the
// stores do not refuse a row for it, they record [HostID] of it.
func CheckHostID(v string) error {
	if hostIDOK(v) {
		return nil
	}
	switch {
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: host id %.40q…: not valid UTF-8", ErrInvalid, v)
	case utf8.RuneCountInString(v) > MaxHostIDLen:
		return fmt.Errorf("%w: host id %.40q…: %d characters, at most %d", ErrInvalid, v, utf8.RuneCountInString(v), MaxHostIDLen)
	default:
		return fmt.Errorf("%w: host id %.40q: only printable characters", ErrInvalid, v)
	}
}

// hostIDOK is CheckHostID without the error, on the call path.
func hostIDOK(v string) bool {
	if len(v) > MaxHostIDLen*utf8.UTFMax {
		return false
	}
	n := 0
	for i := 0; i < len(v); {
		c := v[i]
		if c >= 0x20 && c < 0x7f { // printable ASCII
			i++
			n++
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size <= 1 || !unicode.IsPrint(r) {
			return false
		}
		i += size
		n++
	}
	return n <= MaxHostIDLen
}

// HostID returns v as a ledger row records it: v itself when
// [CheckHostID] accepts it; otherwise every byte that is not valid UTF-8
// and every character that is not printable (control characters, NUL,
// line and paragraph separators) is replaced with U+FFFD, and a value of
// more than [MaxHostIDLen] characters is cut to MaxHostIDLen-1 followed by
// "…". The result always passes CheckHostID, so that any string a client
// sends is recorded on both back ends (PostgreSQL's text takes no NUL
// byte) without refusing the settlement it comes with.
func HostID(v string) string {
	if hostIDOK(v) {
		return v
	}
	var b strings.Builder
	n := 0
	for _, r := range v { // invalid bytes come as utf8.RuneError
		if n == MaxHostIDLen {
			// Over the limit: the last kept character gives way to "…".
			s := b.String()
			_, size := utf8.DecodeLastRuneInString(s)
			return s[:len(s)-size] + "…"
		}
		if !unicode.IsPrint(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
