// Command openapischemas extracts, from OpenAI's published OpenAPI
// description (MIT licence), the component schemas the gateway's answers
// are checked against, with every schema they refer to, into one JSON
// document the gateway's tests validate with. Run it again when the spec
// is updated:
//
//	go run ./internal/openapischemas -spec ../shared/reference/openapi/openai-openapi.yaml \
//	    -out gateway/testdata/openapi/schemas.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// roots are the schemas the gateway's OpenAI-protocol answers must match.
var roots = []string{
	"CreateChatCompletionResponse",
	"CreateChatCompletionStreamResponse",
	"Response",
	"ResponseStreamEvent",
	"ListModelsResponse",
	"Model",
	"ErrorResponse",
}

const refPrefix = "#/components/schemas/"

func main() {
	spec := flag.String("spec", "", "the OpenAPI description (YAML)")
	out := flag.String("out", "", "the JSON document to write")
	flag.Parse()
	if *spec == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: openapischemas -spec openai-openapi.yaml -out schemas.json")
		os.Exit(2)
	}
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapischemas:", err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var doc struct {
		OpenAPI string `yaml:"openapi"`
		Info    struct {
			Version string `yaml:"version"`
		} `yaml:"info"`
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	all := doc.Components.Schemas
	keep := map[string]any{}
	var walk func(name, from string) error
	walk = func(name, from string) error {
		if _, done := keep[name]; done {
			return nil
		}
		s, ok := all[name]
		if !ok {
			return fmt.Errorf("%s: schema %q (referred to by %s) is not in components.schemas", specPath, name, from)
		}
		keep[name] = s
		for _, ref := range refs(s) {
			if err := walk(ref, name); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(r, "the list of roots"); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(keep))
	for n := range keep {
		names = append(names, n)
	}
	sort.Strings(names)
	res := map[string]any{
		"$comment": fmt.Sprintf("Extracted by internal/openapischemas from OpenAI's OpenAPI description %s (openapi %s, MIT licence: LICENSE-openai-openapi): the schemas %s and the %d they refer to.",
			doc.Info.Version, doc.OpenAPI, strings.Join(roots, ", "), len(names)-len(roots)),
		"components": map[string]any{"schemas": keep},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	return os.WriteFile(outPath, buf.Bytes(), 0o644)
}

// refs returns the component schemas v refers to.
func refs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(s, refPrefix) {
				out = append(out, strings.TrimPrefix(s, refPrefix))
				continue
			}
			out = append(out, refs(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, refs(e)...)
		}
	}
	return out
}
