package agentmark

import (
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	for _, c := range []struct {
		name  string
		texts []string
		want  string
		err   string
	}{
		{"none", []string{"You are a coding agent.", ""}, "", ""},
		{"first line", []string{Line("critic") + "\nYou are the critic."}, "critic", ""},
		{"later block", []string{"You are Codex.", "<x>\n" + Line("pr_reviewer") + "\r\nbody"}, "pr_reviewer", ""},
		{"indented", []string{"  " + Line("cortex-explore") + " \n"}, "cortex-explore", ""},
		{"same twice", []string{Line("critic"), "x\n" + Line("critic")}, "critic", ""},
		{"two agents", []string{Line("critic"), Line("builder")}, "", `names two CortexBuild agents ("critic" and "builder")`},
		{"inside a sentence", []string{"see " + Line("critic") + " for details"}, "", ""},
		{"quoted", []string{"`" + Line("critic") + "`"}, "", ""},
		{"bad name", []string{"[cortexbuild agent: crit ic]", "[cortexbuild agent: ]"}, "", ""},
		{"too long", []string{Line(strings.Repeat("a", 65))}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Find(c.texts...)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Find = %q, %v; want error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Find = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestLineIsFound(t *testing.T) {
	for _, a := range []string{"planner", "critic", "tester_validator", "cortex-explore", "my-agent_2"} {
		if got, err := Find(Line(a)); got != a || err != nil {
			t.Errorf("Find(Line(%q)) = %q, %v", a, got, err)
		}
	}
}

func FuzzFind(f *testing.F) {
	f.Add(Line("critic") + "\nbody")
	f.Add("[cortexbuild agent: a]\n[cortexbuild agent: b]")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Find(s)
		if err == nil && a != "" && !strings.Contains(s, Line(a)) {
			t.Fatalf("Find(%q) = %q, which it does not contain", s, a)
		}
	})
}
