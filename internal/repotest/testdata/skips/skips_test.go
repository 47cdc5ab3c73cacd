// Package skips is run by TestMakeTestListsSkippedTests: one test passes,
// one skips saying why.
package skips

import "testing"

func TestRuns(t *testing.T) {}

func TestNeedsAService(t *testing.T) {
	t.Skip("skipped: the example service is not reachable at 127.0.0.1:1; set EXAMPLE_URL")
}
