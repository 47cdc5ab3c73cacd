package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// A "---" after the first document would make a YAML decoder ignore the
// rest of the file (budgets included); config validate refuses it at the
// marker's line and says how to fix it, and a leading "---" stays valid.
func TestValidateRefusesASecondYAMLDocument(t *testing.T) {
	dir := writeConfig(t, "---\nlocality:\n  mode: local-only\n---\nbudgets:\n  task: \"-1\"\n")
	code, _, errs := run(t, dir, nil, "config", "validate")
	want := `llm-config.yaml:4:1: a second YAML document starts here, which would be ignored; llm-config.yaml is one document: remove the "---" line`
	if code != ExitConfig || !strings.Contains(errs, want) {
		t.Errorf("validate = %d %q, want %q", code, errs, want)
	}
	code, out, _ := run(t, dir, nil, "config", "validate", "--json")
	var res validation
	if code != ExitConfig || json.Unmarshal([]byte(out), &res) != nil || res.Valid || len(res.Errors) != 1 {
		t.Errorf("--json = %d %s", code, out)
	}

	dir = writeConfig(t, "locality:\n  mode: local-only\n...\nbudgets:\n  task: \"-1\"\n")
	if code, _, errs := run(t, dir, nil, "config", "validate"); code != ExitConfig || !strings.Contains(errs, `llm-config.yaml:3:1: content after the "..." end-of-document marker`) {
		t.Errorf("validate after ... = %d %q", code, errs)
	}

	dir = writeConfig(t, "---\nbudgets:\n  task: \"1\"\n")
	if code, out, errs := run(t, dir, nil, "config", "validate"); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("leading --- = %d %q %q", code, out, errs)
	}
}
