package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

func (e *env) criticCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "critic", Short: "The critic gate: check critic transcripts"}
	var authors, known []string
	var risk, model string
	var requireVendor, asJSON bool
	verify := &cobra.Command{
		Use:   "verify FILE --author MODEL --risk LEVEL [--model MODEL]",
		Short: "Check a critic transcript against the critic gate (for host hooks and pull-request checks)",
		Long: `verify reads a critic's output (FILE, or - for standard input) and applies the critic gate
as the orchestrator does for its own calls: on a task of medium risk or more the output must
carry exactly one line 'independent_reviewer: <model-or-agent-id>', naming a configured model
or agent that is not the plan's author (--author, repeatable) and, when --model says which
model the critic ran on, that model or the critic agent. Known ids are the models of the price
catalog and of llm-config.yaml, the agents, and --known. It exits 0 when the review counts,
1 with the reason when it does not, and 2 on bad arguments.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if risk == "" {
				return withCode(ExitUsage, errors.New("--risk is required: low, medium, high or critical"))
			}
			lvl, err := critic.ParseRisk(risk)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("--risk: %w", err))
			}
			if lvl.Gated() && len(authors) == 0 {
				return withCode(ExitUsage, errors.New("--author is required: the model that authored the plan"))
			}
			text, err := e.readTranscript(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			ids, err := e.knownIDs(f, known)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			rules := critic.Rules{Risk: lvl, Authors: authors, Known: ids, RequireDifferentVendor: requireVendor || f.Critic.RequireDifferentVendor}
			rev, verr := critic.Verify(text, model, rules)
			var rj *critic.Rejection
			if verr != nil && !errors.As(verr, &rj) {
				return withCode(ExitFailure, verr)
			}
			if asJSON {
				out := map[string]any{"ok": rj == nil, "risk": lvl.String(), "authors": authors, "reviewer": rev.Reviewer, "line": rev.Line, "model": model}
				if rj != nil {
					out["reason"], out["fix"] = rj.Reason, rj.Fix
				}
				var failed error
				if rj != nil {
					failed = withCode(ExitFailure, withKind("rejected", fmt.Errorf("%s: rejected: %s; %s", args[0], rj.Reason, rj.Fix)))
				}
				return writeReport(cmd.OutOrStdout(), out, failed)
			}
			switch {
			case rj != nil:
				return withCode(ExitFailure, fmt.Errorf("%s: rejected: %s; %s", args[0], rj.Reason, rj.Fix))
			case !lvl.Gated():
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: risk %s needs no independent review\n", args[0], lvl)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: independent_reviewer %s (line %d) reviewed a plan by %s (risk %s)\n", args[0], rev.Reviewer, rev.Line, strings.Join(authors, ", "), lvl)
			}
			return nil
		},
	}
	fl := verify.Flags()
	fl.StringArrayVar(&authors, "author", nil, "model that authored the plan (repeatable)")
	fl.StringVar(&risk, "risk", "", "the task's risk: low, medium, high or critical")
	fl.StringVar(&model, "model", "", "model the critic ran on, when known")
	fl.StringArrayVar(&known, "known", nil, "another accepted reviewer id (repeatable)")
	fl.BoolVar(&requireVendor, "require-different-vendor", false, "the reviewer must be another vendor's model (also critic.require_different_vendor)")
	fl.BoolVar(&asJSON, "json", false, "print the verdict as JSON")
	cmd.AddCommand(verify)
	return cmd
}

// readTranscript reads a file, or standard input for "-".
func (e *env) readTranscript(name string) (string, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(e.stdin)
	} else {
		if !filepath.IsAbs(name) {
			name = filepath.Join(e.wd, name)
		}
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", fmt.Errorf("cannot read the transcript: %w", err)
	}
	return string(b), nil
}

// knownIDs accepts the models of the price catalog and of the
// configuration, the agents, and extra.
func (e *env) knownIDs(f *config.File, extra []string) (func(string) bool, error) {
	cat, err := e.catalog(f)
	if err != nil {
		return nil, err
	}
	ids := slices.Clone(extra)
	ids = append(ids, orchestrator.AgentNames()...)
	for name, a := range f.Agents {
		ids = append(ids, name)
		if a != nil && a.Model != "" {
			ids = append(ids, a.Model)
		}
	}
	for _, p := range f.Providers {
		for _, m := range p.Models {
			ids = append(ids, m)
		}
	}
	return func(id string) bool {
		if slices.ContainsFunc(ids, func(k string) bool { return strings.EqualFold(k, id) || critic.SameModel(k, id) }) {
			return true
		}
		_, err := cat.Find(id)
		if err != nil {
			_, err = cat.Find(critic.CanonicalModel(id))
		}
		return err == nil
	}, nil
}
