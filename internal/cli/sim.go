package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/internal/sim"
)

// simDefaultPortBase is the first port of 'cortexbuild sim' unless
// --port-base says otherwise: fixed, so that a written configuration stays
// valid from one run to the next.
const simDefaultPortBase = 24700

// simInfo is what 'cortexbuild sim --json' prints once it serves.
type simInfo struct {
	Endpoints  []sim.Endpoint `json:"endpoints"`
	Faults     []string       `json:"faults"`
	KeyEnv     string         `json:"key_env"`
	Key        string         `json:"key"`
	ConfigFile string         `json:"config_file,omitempty"`
	Hint       string         `json:"hint"`
}

func (e *env) simCmd() *cobra.Command {
	var (
		faults                     []string
		host, writeConfig          string
		portBase                   int
		printConfig, asJSON, force bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Serve local fakes of Anthropic, OpenAI, Ollama, vLLM and Gemini with scriptable faults",
		Long: fmt.Sprintf(`sim serves wire-faithful fakes of the providers on loopback ports, so that a
configuration and its failover can be tried offline and in CI without spending
money. Each endpoint answers every call with an echo of the last user text
("echo: ...") unless a --fault is scripted:

  anthropic  (type anthropic)                 port N      key %[1]s required
  openai     (type openai_compatible/openai)  port N+1    key %[1]s required
  ollama     (type openai_compatible/ollama)  port N+2    any key, or none
  vllm       (type openai_compatible/vllm)    port N+3    any key, or none
  gemini     (type gemini)                    port N+4    key %[1]s required

N is --port-base (default %[2]d; 0 for any free ports). The sim prints its
endpoints and serves until interrupted (Ctrl-C). --write-config FILE writes a
complete llm-config.yaml pointing every provider at it: keys read from
$%[3]s, routing preference anthropic, openai, gemini, ollama, failover
on rate limits, locality local-only, cache off. --print-config prints that
file for the fixed ports and exits without serving. Then:

  export %[3]s=%[1]s; cortexbuild --config FILE ...

Faults (--fault, repeatable) are written %[4]s:
PROVIDER is anthropic, openai, ollama, vllm or gemini; FAULT an HTTP status or a
name below; xN how many consecutive calls fail (default 1; x0 or xinf: every
call). They apply, in order, to the provider's generation route (messages,
chat completions, generateContent), before the echo reply. Parameters:
retry-after=SECONDS (2, 0.5, 1500ms), after=N (events or chunks sent before a
midstream error or a cut), reason=R (gemini:blocked).

%[5]s
Examples:
  cortexbuild sim --fault anthropic:529x2 --write-config sim.yaml
  cortexbuild sim --fault anthropic:429:retry-after=2 --fault openai:quota
  cortexbuild sim --fault gemini:429:retry-after=31 --fault ollama:slowxinf
  cortexbuild sim --print-config > sim.yaml`, sim.Key, simDefaultPortBase, sim.KeyEnv, sim.Syntax, sim.FaultHelp()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var parsed []sim.Fault
			for _, s := range faults {
				f, err := sim.ParseFault(s)
				if err != nil {
					return withCode(ExitUsage, fmt.Errorf("--fault: %w", err))
				}
				parsed = append(parsed, f)
			}
			if portBase < 0 || portBase > 65535-4 {
				return withCode(ExitUsage, fmt.Errorf("--port-base %d: write a port between 1 and %d (the five endpoints take N to N+4), or 0 for any free ports", portBase, 65535-4))
			}
			stdout := cmd.OutOrStdout()
			stderr := &simLockedWriter{w: cmd.ErrOrStderr()}
			opts := sim.Options{Host: host, Faults: parsed, Ports: sim.PortsFrom(portBase),
				Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "sim: "+format+"\n", args...) }}
			path := writeConfig
			if path != "" && !filepath.IsAbs(path) && e.wd != "" {
				path = filepath.Join(e.wd, path)
			}

			if printConfig {
				if portBase == 0 {
					return withCode(ExitUsage, errors.New("--print-config needs fixed ports to write into the file: drop --port-base 0 (or give a base), or serve with --write-config FILE"))
				}
				eps, err := opts.Endpoints()
				if err != nil {
					return simError(err)
				}
				data := sim.ConfigYAML(eps)
				if path != "" {
					if err := simWriteFile(path, data, force); err != nil {
						return withCode(ExitFailure, err)
					}
					fmt.Fprintf(stderr, "wrote %s\n", path)
				}
				_, err = stdout.Write(data)
				return err
			}

			if path != "" && !force {
				if _, err := os.Stat(path); err == nil {
					return withCode(ExitFailure, fmt.Errorf("%s exists; use --force to overwrite it", path))
				}
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			s, err := sim.Start(ctx, opts)
			if err != nil {
				if portBase != 0 && !errors.Is(err, sim.ErrNotLoopback) {
					err = fmt.Errorf("%w (another sim running? pick another --port-base, or --port-base 0 for any free ports)", err)
				}
				return simError(err)
			}
			defer s.Close()
			if path != "" {
				if err := simWriteFile(path, s.Config(), force); err != nil {
					return withCode(ExitFailure, err)
				}
			}

			info := simInfo{Endpoints: s.Endpoints(), Faults: []string{}, KeyEnv: sim.KeyEnv, Key: sim.Key, ConfigFile: path}
			for _, f := range parsed {
				info.Faults = append(info.Faults, f.String())
			}
			file := path
			if file == "" {
				file = "<file>"
			}
			info.Hint = fmt.Sprintf("export %s=%s; cortexbuild --config %s ...", sim.KeyEnv, sim.Key, file)
			if asJSON {
				if err := writeJSON(stdout, info); err != nil {
					return err
				}
			} else if err := printSim(stdout, info); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "sim: serving until interrupted (Ctrl-C)")
			<-ctx.Done()
			err = s.Close()
			fmt.Fprintln(stderr, "sim: stopped")
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&faults, "fault", nil, "script a fault, "+sim.Syntax+" (repeatable), e.g. anthropic:529x2")
	fl.StringVar(&host, "host", sim.DefaultHost, "loopback address to listen on (127.0.0.1, ::1 or localhost; never another interface)")
	fl.IntVar(&portBase, "port-base", simDefaultPortBase, "first port: anthropic N, openai N+1, ollama N+2, vllm N+3, gemini N+4; 0 for any free ports")
	fl.BoolVar(&printConfig, "print-config", false, "print the llm-config.yaml for these ports and exit without serving")
	fl.StringVar(&writeConfig, "write-config", "", "write the llm-config.yaml pointing at the sim to this file (never overwritten without --force)")
	fl.BoolVar(&force, "force", false, "overwrite the --write-config file if it exists")
	fl.BoolVar(&asJSON, "json", false, "print the endpoints as JSON")
	return cmd
}

// simError maps a sim start error to its exit code: a host that is not
// loopback is a usage error, anything else (a port in use) a failure.
func simError(err error) error {
	if errors.Is(err, sim.ErrNotLoopback) {
		return withCode(ExitUsage, fmt.Errorf("--host: %w", err))
	}
	return withCode(ExitFailure, fmt.Errorf("sim: %w", err))
}

func printSim(w io.Writer, info simInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tTYPE\tBASE URL\tKEY")
	for _, ep := range info.Endpoints {
		typ := ep.Type
		if ep.Profile != "" {
			typ += "/" + ep.Profile
		}
		key := ep.Key
		if key == "" {
			key = "any (or none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ep.Provider, typ, ep.BaseURL, key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(info.Faults) == 0 {
		fmt.Fprintln(w, "\nfaults: none (every call gets an echo reply)")
	} else {
		fmt.Fprintf(w, "\nfaults, in order, then echo replies: %s\n", strings.Join(info.Faults, ", "))
	}
	if info.ConfigFile != "" {
		fmt.Fprintf(w, "wrote %s\n", info.ConfigFile)
	}
	_, err := fmt.Fprintln(w, info.Hint)
	return err
}

// simWriteFile writes data to path, creating its directory, and refuses to
// replace an existing file unless force is set.
func simWriteFile(path string, data []byte, force bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; use --force to overwrite it", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// simLockedWriter serialises writes from request goroutines (fault logs) and
// the command.
type simLockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *simLockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
