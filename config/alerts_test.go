package config

import (
	"slices"
	"strings"
	"testing"
)

func TestAlertThresholds(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []int
	}{
		{"budgets:\n  task: \"5\"\n", []int{50, 80, 100}},
		{"budgets:\n  alerts: [90, 25]\n", []int{90, 25}},
		{"budgets:\n  alerts:\n    - 100\n", []int{100}},
		{"budgets:\n  alerts: []\n", []int{}},
	} {
		f, err := Parse("cfg.yaml", []byte(tc.yaml), testRegistry(t))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := f.Budgets.AlertThresholds(); !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("%q: thresholds %#v; want %#v", tc.yaml, got, tc.want)
		}
	}
}

// Each bad threshold is reported at its own line and column.
func TestBadAlertThresholds(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"budgets:\n  alerts: [50, 0, 120]\n", []string{
			"cfg.yaml:2:16: budgets.alerts[1]: 0 is not a percentage of the budget from 1 to 100; write e.g. [50, 80, 100], or [] to turn alerts off",
			"cfg.yaml:2:19: budgets.alerts[2]: 120 is not a percentage",
		}},
		{"budgets:\n  alerts:\n    - 80\n    - -5\n", []string{"cfg.yaml:4:7: budgets.alerts[1]: -5 is not a percentage"}},
		{"budgets:\n  alerts:\n    - 50\n    - 80\n    - 50\n", []string{"cfg.yaml:5:7: budgets.alerts[2]: 50% is listed twice; list each threshold once"}},
		{"budgets:\n  alerts: [50.5]\n", []string{"cfg.yaml:2:12: budgets.alerts[0]: expected a whole percentage such as 80"}},
		{"budgets:\n  alerts: 80\n", []string{"cfg.yaml:2:11: budgets.alerts: expected a list"}},
	} {
		_, err := Parse("cfg.yaml", []byte(tc.yaml), testRegistry(t))
		if err == nil {
			t.Errorf("accepted:\n%s", tc.yaml)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error\n  %v\nlacks\n  %s", tc.yaml, err, w)
			}
		}
	}
}
