package config

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// positioned is one line of a Parse error: file:line:column: message.
var positioned = regexp.MustCompile(`^llm-config\.yaml:[1-9][0-9]*:[0-9]+: \S`)

// FuzzParse feeds arbitrary bytes as llm-config.yaml: Parse returns a
// File or an error whose every line names the file and a line, and never
// panics.
func FuzzParse(f *testing.F) {
	starter, err := os.ReadFile("starter.yaml")
	if err != nil {
		f.Fatal(err)
	}
	seeds := []string{valid, string(starter), "", "version: 1\n", "version: 2\n", "version: 1\nproviders:\n  x:\n    type: nope\n",
		"version: 1\n\tproviders: {}\n", "version: [1\n", "a: &a [*a]\n", "version: 1\nbudgets:\n  task: -3\n", "version: 1\nrouting:\n  max_retry_after: forever\n"}
	for i, s := range seeds {
		f.Add([]byte(s))
		providertest.WriteSeeds(f, fmt.Sprintf("seed-%d", i), []byte(s))
	}
	reg := testRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("llm-config.yaml", data, reg)
		if err == nil {
			if file == nil {
				t.Fatal("no File and no error")
			}
			return
		}
		if file != nil {
			t.Errorf("a File and an error: %v", err)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !positioned.MatchString(line) {
				t.Errorf("error line %q does not say file:line:column", line)
			}
		}
	})
}
