package config_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
)

// Eight handles of one secrets file (as eight processes have) save ten
// fields each at once: every field is in the file afterwards.
func TestSecretsFileOfSeveralHandlesLosesNoSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), config.SecretsFileName)
	const handles, each = 8, 10
	var wg sync.WaitGroup
	for i := range handles {
		s := config.OpenSecretsFile(path)
		wg.Go(func() {
			for j := range each {
				if err := s.Set(fmt.Sprintf("p%d", i), fmt.Sprintf("f%d", j), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := config.OpenSecretsFile(path)
	n := 0
	for i := range handles {
		fields, err := s.Fields(fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		n += len(fields)
	}
	if n != handles*each {
		t.Errorf("the file holds %d fields after %d saves: some were lost", n, handles*each)
	}
}
