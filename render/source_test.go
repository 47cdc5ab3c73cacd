package render

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func loadFS(files map[string]string) (*Sources, error) {
	m := fstest.MapFS{}
	for p, c := range files {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return loadSources(m)
}

func TestBuiltinSources(t *testing.T) {
	src, err := loadFS(nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range src.Personas {
		ids = append(ids, p.ID)
		if !p.Builtin || p.Source != "" || len(p.Body) < 500 || p.Description == "" {
			t.Errorf("built-in %s: builtin %v, source %q, %d-byte body", p.ID, p.Builtin, p.Source, len(p.Body))
		}
	}
	if strings.Join(ids, ",") != strings.Join(builtinPersonas, ",") {
		t.Errorf("personas = %v", ids)
	}
	if len(src.Rules) != 1 || src.Rules[0].ID != CriticGate || src.Rules[0].Scoped() {
		t.Errorf("rules = %+v", src.Rules)
	}
	for id, ro := range map[string]bool{"critic": true, "planner": true, "explore": true, "builder": false, "tester_validator": false} {
		if src.Persona(id).ReadOnly() != ro {
			t.Errorf("%s read-only = %v, want %v", id, !ro, ro)
		}
	}
}

func TestOverridesMergeOverBuiltins(t *testing.T) {
	src, err := loadFS(map[string]string{
		"AGENTS_IGNORED.md":                 "not a source",
		AgentsDir + "/critic.md":            "---\nmodels:\n  cursor: claude-4.5-opus\n---\n",
		AgentsDir + "/builder.md":           "---\ndescription: Our builder.\ntools: [read, edit]\n---\nBuild it our way.\n",
		AgentsDir + "/zeta.md":              "---\ndescription: Z.\n---\nZ.\n",
		AgentsDir + "/alpha.md":             "---\ndescription: A.\ntools: [all]\n---\nA.\n",
		RulesDir + "/" + CriticGate + ".md": "---\ndescription: Our gate.\n---\nOur wording: the critic agent must print independent_reviewer: <id>.\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	critic := src.Persona("critic")
	if critic.Model(Cursor) != "claude-4.5-opus" || critic.Model(Claude) != "sonnet" || !strings.Contains(critic.Body, "adversarial") || critic.Source != AgentsDir+"/critic.md" {
		t.Errorf("critic override did not merge: %+v", critic)
	}
	builder := src.Persona("builder")
	if builder.Description != "Our builder." || builder.Body != "Build it our way.\n" || strings.Join(builder.Tools, ",") != "read,edit" || builder.Model(Codex) != "gpt-6.1-terra" {
		t.Errorf("builder override: %+v", builder)
	}
	n := len(src.Personas)
	if src.Personas[n-2].ID != "alpha" || src.Personas[n-1].ID != "zeta" || src.Persona("alpha").Tools != nil {
		t.Errorf("custom personas not appended in id order: %s, %s", src.Personas[n-2].ID, src.Personas[n-1].ID)
	}
	if src.Rule(CriticGate).Description != "Our gate." || len(src.Rules) != 1 {
		t.Errorf("rule override: %+v", src.Rules)
	}
}

// TestBadSources: every problem is reported as file:line:column (or
// file:) with what was wrong.
func TestBadSources(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unknown key", map[string]string{AgentsDir + "/critic.md": "---\ndescription: x\nmodle: opus\n---\nbody\n"},
			[]string{`.cortexbuild/agents/critic.md:3:1: unknown key "modle" at the top level (did you mean "models"?); valid keys: description, models, tools`}},
		{"unknown host", map[string]string{AgentsDir + "/critic.md": "---\nmodels:\n  claude: opus\n  gemini: x\n---\n"},
			[]string{`.cortexbuild/agents/critic.md:4:3: unknown key "gemini" in models`}},
		{"unknown rule key", map[string]string{RulesDir + "/r.md": "---\ndescription: d\nglobs: [\"*.go\"]\n---\ntext\n"},
			[]string{`.cortexbuild/rules/r.md:3:1: unknown key "globs" at the top level; valid keys: description, paths`}},
		{"wrong type", map[string]string{AgentsDir + "/critic.md": "---\ntools: read\n---\n"},
			[]string{`.cortexbuild/agents/critic.md:2:8: tools: expected a list`}},
		{"no frontmatter", map[string]string{AgentsDir + "/x.md": "You are x.\n"},
			[]string{`.cortexbuild/agents/x.md:1:1: must start with a '---' line`}},
		{"unclosed frontmatter", map[string]string{AgentsDir + "/x.md": "---\ndescription: x\n"},
			[]string{`.cortexbuild/agents/x.md:1:1: the frontmatter opened on line 1 is never closed`}},
		{"custom persona without description or body", map[string]string{AgentsDir + "/x.md": "---\ntools: [read]\n---\n"},
			[]string{`.cortexbuild/agents/x.md:2:1: missing required key "description"`, `.cortexbuild/agents/x.md: the persona has no instructions`}},
		{"multi-line description", map[string]string{AgentsDir + "/x.md": "---\ndescription: |\n  one\n  two\n---\nbody\n"},
			[]string{`.cortexbuild/agents/x.md:2:14: description must be a single line`}},
		{"bad tool", map[string]string{AgentsDir + "/x.md": "---\ndescription: x\ntools: [read, Bash]\n---\nbody\n"},
			[]string{`.cortexbuild/agents/x.md:3:8: tools: unknown tool "Bash"; valid tools: read, search, edit, execute, web, agent, todo`}},
		{"claude alias on codex", map[string]string{AgentsDir + "/builder.md": "---\nmodels:\n  codex: opus\n---\n"},
			[]string{`.cortexbuild/agents/builder.md:3:10: models.codex: "opus" is a Claude Code alias; Codex CLI needs an OpenAI model id`}},
		{"bad file name", map[string]string{AgentsDir + "/Critic.md": "---\ndescription: x\n---\nb\n", AgentsDir + "/notes.txt": "x"},
			[]string{`.cortexbuild/agents/Critic.md: file name "Critic" is not a valid id`, `.cortexbuild/agents/notes.txt: is not a .md file`}},
		{"gate made path-scoped", map[string]string{RulesDir + "/rule-critic-gate.md": "---\ndescription: d\npaths: [\"src/**\"]\n---\nthe critic prints independent_reviewer: x\n"},
			[]string{`.cortexbuild/rules/rule-critic-gate.md:3:8: rule-critic-gate must stay always on`}},
		{"gate without the reviewer line", map[string]string{RulesDir + "/rule-critic-gate.md": "---\ndescription: d\n---\nBe careful.\n"},
			[]string{`.cortexbuild/rules/rule-critic-gate.md: rule-critic-gate must keep requiring the critic agent`}},
		{"glob matching everything", map[string]string{RulesDir + "/r.md": "---\ndescription: d\npaths: [\"**/*\"]\n---\ntext\n"},
			[]string{`.cortexbuild/rules/r.md:3:8: paths: "**/*" matches every file; remove paths`}},
		{"glob with comma", map[string]string{RulesDir + "/r.md": "---\ndescription: d\npaths: [\"src/*.{ts,tsx}\"]\n---\ntext\n"},
			[]string{`contains a comma`}},
		{"name clash after rename", map[string]string{AgentsDir + "/cortex-explore.md": "---\ndescription: d\n---\nb\n"},
			[]string{`.cortexbuild/agents/cortex-explore.md: persona cortex-explore is rendered as "cortex-explore", the name the built-in explore persona already has`}},
		{"several files at once", map[string]string{
			AgentsDir + "/a.md": "---\nfoo: 1\n---\nb\n",
			RulesDir + "/b.md":  "---\ndescription: d\n---\n",
		}, []string{`.cortexbuild/agents/a.md:2:1: unknown key "foo"`, `.cortexbuild/rules/b.md: the rule has no text`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadFS(c.files)
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *SourceError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestCriticModelRefused: render refuses a critic model that is unset,
// inherit, or the planner's, naming the host and the persona file.
func TestCriticModelRefused(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		targets []Host
		want    []string
	}{
		{"critic inherit", map[string]string{AgentsDir + "/critic.md": "---\nmodels:\n  copilot: inherit\n---\n"}, nil,
			[]string{`.cortexbuild/agents/critic.md:3:12: models.copilot: the critic's GitHub Copilot model is "inherit"`, "rule-critic-gate"}},
		{"critic equal to planner", map[string]string{AgentsDir + "/critic.md": "---\nmodels:\n  codex: gpt-6.2-sol\n---\n"}, nil,
			[]string{`.cortexbuild/agents/critic.md:3:10: models.codex: on Codex CLI the critic and the planner would both run on "gpt-6.2-sol" (the planner's model comes from the built-in planner persona)`}},
		{"planner changed to the critic's", map[string]string{AgentsDir + "/planner.md": "---\nmodels:\n  claude: Sonnet\n---\n"}, nil,
			[]string{`.cortexbuild/agents/planner.md:3:11: models.claude: on Claude Code the critic and the planner would both run on "sonnet" (the critic's model comes from the built-in critic persona)`}},
		{"both hosts reported", map[string]string{AgentsDir + "/critic.md": "---\nmodels:\n  claude: inherit\n  cursor: sonnet-4.5\n---\n"}, nil,
			[]string{"critic.md:3:11: models.claude", "critic.md:4:11: models.cursor: on Cursor"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, err := loadFS(c.files)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Render(src, c.targets)
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("Render = %v, want a *SourceError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}

	// Only the targets are checked: a critic inherit on Copilot does not
	// stop a Claude-only render.
	src, err := loadFS(map[string]string{AgentsDir + "/critic.md": "---\nmodels:\n  copilot: inherit\n---\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(src, []Host{Claude}); err != nil {
		t.Errorf("Claude-only render: %v", err)
	}

	// Unset: no model at all for a host (possible through the API).
	src, _ = loadFS(nil)
	delete(src.Persona(criticID).Models, Cursor)
	_, err = Render(src, nil)
	if err == nil || !strings.Contains(err.Error(), "models.cursor: the critic's Cursor model is unset") || !strings.Contains(err.Error(), "the built-in critic persona") {
		t.Errorf("unset critic model: %v", err)
	}
}

func TestFrontmatterLineEndingsAndBOM(t *testing.T) {
	src, err := loadFS(map[string]string{AgentsDir + "/x.md": "---\r\ndescription: x\r\n---\r\n\r\nBody.  \r\n\r\n"})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Persona("x").Body; got != "Body.\n" {
		t.Errorf("body = %q", got)
	}
	_, err = loadFS(map[string]string{AgentsDir + "/x.md": "\xef\xbb\xbf---\ndescription: x\n---\nb\n"})
	if err == nil || !strings.Contains(err.Error(), "byte order mark") {
		t.Errorf("BOM: %v", err)
	}
}
