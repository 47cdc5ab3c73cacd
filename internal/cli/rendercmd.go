package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/render"
)

// renderReport is what 'cortexbuild render --json' prints.
type renderReport struct {
	Dir      string         `json:"dir"`
	Targets  []render.Host  `json:"targets"`
	Mode     string         `json:"mode"` // render, dry-run, check, clean
	UpToDate bool           `json:"up_to_date"`
	Actions  []renderAction `json:"actions"`
	Warnings []string       `json:"warnings,omitempty"`
}

type renderAction struct {
	Path     string    `json:"path"`
	Op       render.Op `json:"op"`
	Conflict string    `json:"conflict,omitempty"`
	Note     string    `json:"note,omitempty"`
}

func (e *env) renderCmd() *cobra.Command {
	var (
		target, dir                         string
		dryRun, check, clean, force, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Write the project's rules and agent personas into Claude Code, Codex CLI, GitHub Copilot and Cursor",
		Long: `render writes CortexBuild's rules and its ten agent personas (planner, critic, builder,
tester_validator, security_compliance, optimizer, pr_reviewer, explore, recurrence_guard,
enterprise_orchestrator) into the AI coding tools, in the files and formats each one loads:

  all hosts   AGENTS.md (the always-on rules, rule-critic-gate among them)
  claude      CLAUDE.md (imports AGENTS.md), .claude/agents/, .claude/rules/
  codex       .codex/agents/*.toml
  copilot     .github/copilot-instructions.md, .github/agents/*.agent.md, .github/instructions/
  cursor      .cursor/agents/, .cursor/rules/*.mdc

The tools then run the personas on their own vendors' models: no API key and no
llm-config.yaml are needed. Built-in personas and rules are overridden, and new ones
added, with .cortexbuild/agents/<id>.md and .cortexbuild/rules/<id>.md.

.cortexbuild/render-manifest.json records what render wrote. A file render did not
write, or one edited by hand since, is never overwritten or deleted without --force.
--check exits 1 when any file differs from what render would write (for CI).
Without --target, render uses the hosts of the last run (all four the first time).

Exit codes: 0 done (or, with --check, up to date); 1 --check found drift, or a file is not
render's to change (nothing was written); 2 usage error; 3 the personas or rules are
invalid, or a host's critic model is unset, inherit or the planner's.`,
		Example: `  cortexbuild render                      # write every host's files
  cortexbuild render --target claude,codex
  cortexbuild render --dry-run            # list what would change
  cortexbuild render --check              # in CI: exit 1 if anything drifted
  cortexbuild render --clean --target cursor   # remove the Cursor files render wrote`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if check && (dryRun || clean || force) {
				return withCode(ExitUsage, errors.New("--check cannot be combined with --dry-run, --clean or --force"))
			}
			var targets []render.Host
			if cmd.Flags().Changed("target") {
				t, err := render.ParseTargets(target)
				if err != nil {
					return withCode(ExitUsage, err)
				}
				targets = t
			}
			if dir == "" {
				dir = projectDir(e.wd, e.ceilings())
			}
			plan, err := render.NewPlan(render.Options{Dir: dir, Targets: targets, Clean: clean, Force: force})
			var serr *render.SourceError
			if errors.As(err, &serr) {
				return withCode(ExitConfig, fmt.Errorf("render: the personas and rules are invalid:\n%w", err))
			}
			if err != nil {
				return withCode(ExitFailure, err)
			}
			for _, w := range plan.Warnings {
				fmt.Fprintln(e.stderr, "cortexbuild: warning:", w)
			}
			mode := "render"
			switch {
			case check:
				mode = "check"
			case dryRun:
				mode = "dry-run"
			case clean:
				mode = "clean"
			}
			out := cmd.OutOrStdout()
			if asJSON {
				// The report describes the plan; a failure to carry it
				// out is added to it.
				rep := report(plan, mode)
				var ferr error
				switch {
				case check:
					if err := renderCheck(out, plan, true); err != nil {
						ferr = withKind("check_failed", err)
					}
				case dryRun:
					ferr = renderDryRun(out, plan, true)
				default:
					if err := plan.Apply(); err != nil {
						ferr = withCode(ExitFailure, err)
					}
				}
				return writeReport(out, rep, ferr)
			}
			switch {
			case check:
				return renderCheck(out, plan, asJSON)
			case dryRun:
				return renderDryRun(out, plan, asJSON)
			}
			if err := plan.Apply(); err != nil {
				return withCode(ExitFailure, err)
			}
			printApplied(out, plan)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "target", "", "hosts to render: a comma-separated list of claude, codex, copilot, cursor, or all (default: the hosts of the last render, or all)")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be written, updated or removed, and change nothing")
	f.BoolVar(&check, "check", false, "exit 1, listing them, if any file differs from what render would write (for CI); change nothing")
	f.BoolVar(&clean, "clean", false, "remove the files render generated for the targets (only those, and only if not edited by hand)")
	f.BoolVar(&force, "force", false, "overwrite or delete files render did not write, or that were edited by hand since")
	f.BoolVar(&asJSON, "json", false, "print the plan as JSON")
	f.StringVar(&dir, "dir", "", "project directory (default: the nearest directory up from here, below $"+config.CeilingEnv+", holding .cortexbuild/ or .git, else this one)")
	return cmd
}

// projectDir is the nearest directory at or above wd, and below any of
// ceilings, that holds .cortexbuild or .git, or wd itself.
func projectDir(wd string, ceilings []string) string {
	for d := range config.Upward(wd, ceilings) {
		for _, marker := range []string{render.SourceDir, ".git"} {
			if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
				return d
			}
		}
	}
	return wd
}

func report(p *render.Plan, mode string) renderReport {
	r := renderReport{Dir: p.Dir, Targets: p.Targets, Mode: mode, UpToDate: p.UpToDate(), Warnings: p.Warnings, Actions: []renderAction{}}
	for _, a := range p.Actions {
		r.Actions = append(r.Actions, renderAction{Path: a.Path, Op: a.Op, Conflict: a.Conflict, Note: a.Note})
	}
	return r
}

func hostList(hs []render.Host) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = string(h)
	}
	return strings.Join(s, ", ")
}

// renderCheck reports drift for CI: every file that differs from what
// render would write.
func renderCheck(out io.Writer, p *render.Plan, quiet bool) error {
	if p.UpToDate() {
		if !quiet {
			fmt.Fprintf(out, "up to date: %d files for %s\n", len(p.Actions), hostList(p.Targets))
		}
		return nil
	}
	n := 0
	for _, a := range p.Actions {
		label := ""
		switch {
		case a.Op == render.OpCreate:
			label = "missing"
		case a.Op == render.OpRemove && a.Conflict != "":
			label = "stale, edited"
		case a.Op == render.OpRemove:
			label = "stale"
		case a.Conflict == "not written by cortexbuild render":
			label = "foreign"
		case a.Conflict != "":
			label = "edited"
		case a.Op == render.OpUpdate:
			label = "outdated"
		default:
			continue
		}
		n++
		if !quiet {
			line := fmt.Sprintf("%-9s %s", label, a.Path)
			if a.Conflict != "" {
				line += " (" + a.Conflict + ")"
			}
			fmt.Fprintln(out, line)
		}
	}
	if op := p.ManifestOp(); op != render.OpUnchanged {
		n++
		label := "outdated"
		if op == render.OpCreate {
			label = "missing"
		}
		if !quiet {
			fmt.Fprintf(out, "%-9s %s\n", label, render.ManifestPath)
		}
	}
	return withCode(ExitFailure, fmt.Errorf("render --check: %d file(s) differ from what cortexbuild render writes; run 'cortexbuild render' and commit the result", n))
}

func opWord(a render.Action) string {
	switch {
	case a.Op == render.OpUpdate && a.Conflict != "":
		return "overwrite"
	case a.Op == render.OpRemove && a.Conflict != "":
		return "delete"
	}
	return string(a.Op)
}

func renderDryRun(out io.Writer, p *render.Plan, quiet bool) error {
	if !quiet {
		for _, a := range p.Actions {
			switch {
			case a.Op == render.OpKeep:
				fmt.Fprintf(out, "would keep      %s (%s)\n", a.Path, a.Note)
			case a.Conflict != "" && !p.Force:
				fmt.Fprintf(out, "would refuse    %s (%s)\n", a.Path, a.Conflict)
			case a.Op == render.OpUnchanged:
			case a.Conflict != "":
				fmt.Fprintf(out, "would %-9s %s (%s)\n", opWord(a), a.Path, a.Conflict)
			default:
				fmt.Fprintf(out, "would %-9s %s\n", opWord(a), a.Path)
			}
		}
		if op := p.ManifestOp(); op != render.OpUnchanged {
			fmt.Fprintf(out, "would %-9s %s\n", op, render.ManifestPath)
		}
		fmt.Fprintln(out, summary(p, "dry run for"))
	}
	if c := p.Conflicts(); len(c) > 0 && !p.Force {
		return withCode(ExitFailure, &render.ConflictError{Actions: c})
	}
	return nil
}

func printApplied(out io.Writer, p *render.Plan) {
	for _, a := range p.Actions {
		switch {
		case a.Op == render.OpKeep:
			fmt.Fprintf(out, "keep      %s (%s)\n", a.Path, a.Note)
		case a.Op == render.OpUnchanged:
		case a.Conflict != "":
			fmt.Fprintf(out, "%-9s %s (%s)\n", opWord(a), a.Path, a.Conflict)
		default:
			fmt.Fprintf(out, "%-9s %s\n", opWord(a), a.Path)
		}
	}
	if op := p.ManifestOp(); op != render.OpUnchanged {
		fmt.Fprintf(out, "%-9s %s\n", op, render.ManifestPath)
	}
	verb := "rendered"
	if p.Clean {
		verb = "cleaned"
	}
	fmt.Fprintln(out, summary(p, verb))
}

func summary(p *render.Plan, verb string) string {
	counts := map[render.Op]int{}
	for _, a := range p.Actions {
		counts[a.Op]++
	}
	return fmt.Sprintf("%s %s in %s: %d created, %d updated, %d removed, %d unchanged, %d kept",
		verb, hostList(p.Targets), p.Dir, counts[render.OpCreate], counts[render.OpUpdate], counts[render.OpRemove], counts[render.OpUnchanged], counts[render.OpKeep])
}
