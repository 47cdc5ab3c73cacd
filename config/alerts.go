package config

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/ledger"
)

// AlertThreshold is one budget alert threshold, in percent of a limit, with
// where it was written.
type AlertThreshold struct {
	Percent int
	Pos     yamlx.Pos
}

// UnmarshalYAMLNode implements yamlx.NodeUnmarshaler, keeping the position
// of each threshold for its errors.
func (a *AlertThreshold) UnmarshalYAMLNode(file string, n *yaml.Node) error {
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		return fmt.Errorf("expected a whole percentage such as 80")
	}
	a.Percent, a.Pos = v, yamlx.Pos{File: file, Line: n.Line, Column: n.Column}
	return nil
}

// AlertThresholds returns the budget alert thresholds in force: those of
// budgets.alerts, the ledger's defaults (50, 80, 100) when it is absent,
// none when it is an empty list.
func (b Budgets) AlertThresholds() []int {
	if b.Alerts == nil {
		return append([]int(nil), ledger.DefaultAlertThresholds...)
	}
	out := make([]int, len(*b.Alerts))
	for i, a := range *b.Alerts {
		out[i] = a.Percent
	}
	return out
}

// validateAlerts reports each threshold of budgets.alerts that is not a
// percentage from 1 to 100, or is given twice, at its line.
func (b Budgets) validateAlerts(add func(yamlx.Pos, string, ...any)) {
	if b.Alerts == nil {
		return
	}
	seen := map[int]bool{}
	for i, a := range *b.Alerts {
		switch {
		case a.Percent <= 0 || a.Percent > 100:
			add(a.Pos, "budgets.alerts[%d]: %d is not a percentage of the budget from 1 to 100; write e.g. [50, 80, 100], or [] to turn alerts off", i, a.Percent)
		case seen[a.Percent]:
			add(a.Pos, "budgets.alerts[%d]: %d%% is listed twice; list each threshold once", i, a.Percent)
		}
		seen[a.Percent] = true
	}
}
