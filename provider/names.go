package provider

import (
	"strings"
)

// didYouMean returns ` (did you mean "x"?)` when one of names is close to s,
// else "". Closeness is an edit distance of at most a third of the length.
func didYouMean(s string, names []string) string {
	if best := Closest(s, names); best != "" {
		return ` (did you mean "` + best + `"?)`
	}
	return ""
}

// Closest returns the name in names nearest to s by edit distance (case
// folded, '-' and '_' treated alike), or "" when none is close enough to be a
// plausible misspelling.
func Closest(s string, names []string) string {
	norm := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "-", "_") }
	ns := norm(s)
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(ns, norm(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	limit := len(s)/3 + 1
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func joinQuoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}
