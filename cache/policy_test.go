package cache_test

import (
	"slices"
	"testing"

	"github.com/cortexbuild/cortexbuild/cache"
)

func TestEnabled(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		agent    string
		override *bool
		want     bool
	}{
		{"tester_validator", nil, true},
		{"optimizer", nil, true},
		{"explore", nil, true},
		{"planner", nil, false},
		{"critic", nil, false},
		{"builder", nil, false},
		{"security_compliance", nil, false},
		{"pr_reviewer", nil, false},
		{"recurrence_guard", nil, false},
		{"enterprise_orchestrator", nil, false},
		{"someone_new", nil, false},
		{"", nil, false},
		{"explore", &off, false},
		{"builder", &on, true},
		{"builder", &off, false},
		{"explore", &on, true},
	} {
		if got := cache.Enabled(tc.agent, tc.override); got != tc.want {
			t.Errorf("Enabled(%q, %v) = %v; want %v", tc.agent, tc.override, got, tc.want)
		}
	}
	if got := cache.ReadOnlyAgents(); !slices.Equal(got, []string{"explore", "optimizer", "tester_validator"}) {
		t.Errorf("ReadOnlyAgents() = %v", got)
	}
}
