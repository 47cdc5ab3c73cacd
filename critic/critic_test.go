package critic

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRisk(t *testing.T) {
	for in, want := range map[string]Risk{"low": Low, "Medium": Medium, " HIGH ": High, "critical": Critical} {
		got, err := ParseRisk(in)
		if err != nil || got != want {
			t.Errorf("ParseRisk(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	_, err := ParseRisk("severe")
	if err == nil || !strings.Contains(err.Error(), `"severe"`) || !strings.Contains(err.Error(), "low, medium, high, critical") {
		t.Errorf("ParseRisk(severe) error = %v; want one naming the value and the choices", err)
	}
	if Low.Gated() || !Medium.Gated() || !Critical.Gated() {
		t.Error("Gated: want medium and above")
	}
	var r Risk
	if err := r.UnmarshalText([]byte("high")); err != nil || r != High {
		t.Errorf("UnmarshalText = %v, %v", r, err)
	}
}

func TestReviewer(t *testing.T) {
	cases := []struct {
		name, text string
		id         string
		line       int
		problem    string // a FieldError containing this; "" for success
		missing    bool
	}{
		{name: "plain", text: "Looks fine.\nindependent_reviewer: gpt-5\n", id: "gpt-5", line: 2},
		{name: "markdown bold and code", text: "verdict: ok\n\n**independent_reviewer:** `gpt-5.2`", id: "gpt-5.2", line: 3},
		{name: "list item, upper case, full stop", text: "- INDEPENDENT_REVIEWER: claude-opus-4-7.", id: "claude-opus-4-7", line: 1},
		{name: "quoted value and comment", text: `independent_reviewer: "critic" (the critic agent)`, id: "critic", line: 1},
		{name: "twice the same", text: "independent_reviewer: gpt-5\n...\nindependent_reviewer: GPT-5", id: "gpt-5", line: 1},
		{name: "instruction text is not the field", text: "I was asked to end with `independent_reviewer: <model-or-agent-id>`.", missing: true},
		{name: "absent", text: "The plan is sound.", missing: true},
		{name: "similar key", text: "independent_reviewers: gpt-5\nreviewer: gpt-5", missing: true},
		{name: "twice, different", text: "independent_reviewer: gpt-5\nindependent_reviewer: gemini-2.5-pro", line: 2, problem: `names "gemini-2.5-pro" here but "gpt-5" on line 1`},
		{name: "empty", text: "ok\nindependent_reviewer:   \n", line: 2, problem: "empty value"},
		{name: "empty in markup", text: "**independent_reviewer:** ``", line: 1, problem: "empty value"},
		{name: "placeholder", text: "independent_reviewer: <model-or-agent-id>", line: 1, problem: "placeholder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, line, err := Reviewer(c.text)
			switch {
			case c.missing:
				if !errors.Is(err, ErrNoReviewer) {
					t.Fatalf("Reviewer = %q, %v; want ErrNoReviewer", id, err)
				}
			case c.problem != "":
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Line != c.line || !strings.Contains(fe.Problem, c.problem) {
					t.Fatalf("Reviewer error = %v; want a FieldError on line %d containing %q", err, c.line, c.problem)
				}
			default:
				if err != nil || id != c.id || line != c.line {
					t.Fatalf("Reviewer = %q, %d, %v; want %q, %d", id, line, err, c.id, c.line)
				}
			}
		})
	}
}

func TestSameModelAndVendor(t *testing.T) {
	same := [][2]string{
		{"claude-sonnet-4-5", "claude-sonnet-4-5-20250929"},
		{"anthropic/claude-opus-4-7", "Claude-Opus-4-7"},
		{"models/gemini-2.5-pro", "gemini-2.5-pro"},
		{"gpt-4o", "gpt-4o-2024-08-06"},
		{"llama3.1:latest", "llama3.1"},
	}
	for _, p := range same {
		if !SameModel(p[0], p[1]) {
			t.Errorf("SameModel(%q, %q) = false", p[0], p[1])
		}
	}
	differ := [][2]string{{"gpt-5", "gpt-5-mini"}, {"claude-opus-4-7", "claude-sonnet-4-5"}, {"", ""}, {"llama3.1:8b", "llama3.1:70b"}}
	for _, p := range differ {
		if SameModel(p[0], p[1]) {
			t.Errorf("SameModel(%q, %q) = true", p[0], p[1])
		}
	}
	vendors := map[string]string{
		"claude-opus-4-7": "anthropic", "openrouter/anthropic/claude-3.5-haiku": "anthropic", "gpt-5.2": "openai", "o3-mini": "openai",
		"gemini-2.5-flash": "google", "llama3.1:8b": "meta", "qwen2.5-coder:32b": "alibaba", "mistral-large-latest": "mistral",
		"deepseek-r1": "deepseek", "my-finetune": "",
	}
	for m, want := range vendors {
		if got := VendorOf(m); got != want {
			t.Errorf("VendorOf(%q) = %q; want %q", m, got, want)
		}
	}
}

func TestVerify(t *testing.T) {
	known := func(id string) bool {
		switch strings.ToLower(id) {
		case "gpt-5", "claude-opus-4-7", "claude-sonnet-4-5", "gemini-2.5-pro", "critic", "llama3.1":
			return true
		}
		return false
	}
	base := Rules{Risk: Medium, Authors: []string{"claude-opus-4-7"}, Known: known}
	cases := []struct {
		name       string
		text       string
		model      string
		rules      Rules
		wantReason string // "" passes
	}{
		{name: "other vendor names itself", text: "fine\nindependent_reviewer: gpt-5", model: "gpt-5", rules: base},
		{name: "dated id of the model used", text: "independent_reviewer: gpt-5-2025-08-07", model: "gpt-5", rules: Rules{Risk: High, Authors: base.Authors}},
		{name: "agent id", text: "independent_reviewer: critic", model: "gemini-2.5-pro", rules: base},
		{name: "same vendor, other model", text: "independent_reviewer: claude-sonnet-4-5", model: "claude-sonnet-4-5", rules: base},
		{name: "low risk needs nothing", text: "no field", model: "claude-opus-4-7", rules: Rules{Risk: Low, Authors: base.Authors}},
		{name: "missing field", text: "The plan is fine.", model: "gpt-5", rules: base, wantReason: "has no independent_reviewer line"},
		{name: "names the author", text: "independent_reviewer: claude-opus-4-7", rules: base, wantReason: "the model that authored the plan"},
		{name: "names the author with its snapshot", text: "independent_reviewer: anthropic/claude-opus-4-7-20260115", rules: base, wantReason: "authored the plan"},
		{name: "ran on the author", text: "independent_reviewer: critic", model: "claude-opus-4-7", rules: base, wantReason: "the critic ran on claude-opus-4-7"},
		{name: "unknown id", text: "independent_reviewer: gpt-9000", rules: base, wantReason: `"gpt-9000", which is no configured model or agent`},
		{name: "names another model than used", text: "independent_reviewer: gemini-2.5-pro", model: "gpt-5", rules: base, wantReason: "but the critic ran on gpt-5"},
		{name: "conflicting lines", text: "independent_reviewer: gpt-5\nindependent_reviewer: critic", model: "gpt-5", rules: base, wantReason: "line 2"},
		{name: "empty value", text: "independent_reviewer:", rules: base, wantReason: "empty value"},
		{name: "vendor required, same vendor", text: "independent_reviewer: claude-sonnet-4-5", model: "claude-sonnet-4-5",
			rules: Rules{Risk: Critical, Authors: base.Authors, RequireDifferentVendor: true}, wantReason: "anthropic's, like the author"},
		{name: "vendor required, unknown vendor", text: "independent_reviewer: critic", model: "my-finetune",
			rules: Rules{Risk: High, Authors: base.Authors, RequireDifferentVendor: true}, wantReason: "is unknown"},
		{name: "vendor required, other vendor", text: "independent_reviewer: critic", model: "llama3.1",
			rules: Rules{Risk: High, Authors: base.Authors, RequireDifferentVendor: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rev, err := Verify(c.text, c.model, c.rules)
			if c.wantReason == "" {
				if err != nil {
					t.Fatalf("Verify = %v; want a pass", err)
				}
				return
			}
			var rj *Rejection
			if !errors.As(err, &rj) || !errors.Is(err, ErrRejected) || !strings.Contains(rj.Reason, c.wantReason) || rj.Fix == "" {
				t.Fatalf("Verify error = %v; want a Rejection with a fix whose reason contains %q", err, c.wantReason)
			}
			if rev.Model != c.model {
				t.Errorf("Review.Model = %q; want %q", rev.Model, c.model)
			}
		})
	}
}
