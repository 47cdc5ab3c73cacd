package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
)

func (e *env) initCmd() *cobra.Command {
	var force bool
	var dir string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter .cortexbuild/llm-config.yaml and its JSON Schema",
		Long: `init writes .cortexbuild/llm-config.yaml (a commented starter configuration) and
.cortexbuild/llm-config.schema.json (for editor validation) into the project directory.
An existing configuration is never overwritten unless --force is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = e.wd
			}
			path, err := config.WriteStarter(dir, force)
			if errors.Is(err, config.ErrExists) {
				return withCode(ExitFailure, err)
			}
			if err != nil {
				return withCode(ExitFailure, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\nnext: set ANTHROPIC_API_KEY (or edit providers:), then run 'cortexbuild config validate'\n", path)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing configuration")
	cmd.Flags().StringVar(&dir, "dir", "", "project directory (default: the current directory)")
	return cmd
}
