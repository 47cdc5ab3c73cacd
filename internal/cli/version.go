package cli

import (
	"fmt"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/pricing"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3";
// otherwise the module version or "devel" is shown.
var Version = ""

type versionInfo struct {
	Version      string            `json:"version"`
	Commit       string            `json:"commit,omitempty"`
	Go           string            `json:"go"`
	Platform     string            `json:"platform"`
	PriceCatalog string            `json:"price_catalog"`
	ProviderSDKs map[string]string `json:"provider_sdks,omitempty"`
	AdapterTypes []string          `json:"adapter_types"`
}

func (e *env) versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the price catalog version and the pinned provider SDKs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := versionInfo{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, AdapterTypes: e.registry.Types(), ProviderSDKs: map[string]string{}}
			if bi, ok := debug.ReadBuildInfo(); ok {
				if info.Version == "" {
					info.Version = bi.Main.Version
				}
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						info.Commit = s.Value
					}
				}
				for _, d := range bi.Deps {
					switch d.Path {
					case "github.com/anthropics/anthropic-sdk-go/v2", "github.com/openai/openai-go/v3": // the Gemini adapter links no SDK
						info.ProviderSDKs[d.Path] = d.Version
					}
				}
			}
			if info.Version == "" || info.Version == "(devel)" {
				info.Version = "devel"
			}
			cat, err := pricing.Default()
			if err != nil {
				return withCode(ExitFailure, err)
			}
			info.PriceCatalog = cat.Version
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "cortexbuild %s", info.Version)
			if info.Commit != "" {
				fmt.Fprintf(w, " (%.12s)", info.Commit)
			}
			fmt.Fprintf(w, " %s %s\nprice catalog %s\n", info.Go, info.Platform, info.PriceCatalog)
			for _, p := range slices.Sorted(maps.Keys(info.ProviderSDKs)) {
				fmt.Fprintf(w, "%s %s\n", p, info.ProviderSDKs[p])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
