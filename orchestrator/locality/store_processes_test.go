package locality

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// envGrantChild names the consent file a child process grants to, and
// envGrantChildName the prefix of the providers it grants.
const (
	envGrantChild     = "CORTEXBUILD_LOCALITY_GRANT_CHILD"
	envGrantChildName = "CORTEXBUILD_LOCALITY_GRANT_NAME"
)

const grantsEach = 10

func grantAll(path, prefix string) error {
	s := NewFileStore(path)
	for i := range grantsEach {
		c := Consent{Provider: fmt.Sprintf("%s-%d", prefix, i), GrantedBy: "test", GrantedAt: time.Unix(1700000000, 0).UTC()}
		if err := s.Grant(context.Background(), c); err != nil {
			return err
		}
	}
	return nil
}

// TestGrantChild is a child's body; it does nothing in a normal test run.
func TestGrantChild(t *testing.T) {
	path := os.Getenv(envGrantChild)
	if path == "" {
		return
	}
	if err := grantAll(path, os.Getenv(envGrantChildName)); err != nil {
		t.Fatal(err)
	}
}

// Four processes and this one grant consent to ten providers each in one
// consent file at once: every grant is in the file afterwards.
func TestFileStoreGrantsOfSeveralProcessesAreAllKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consent.json")
	const children = 4
	var cmds []*exec.Cmd
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGrantChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envGrantChild+"="+path, fmt.Sprintf("%s=child%d", envGrantChildName, i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := grantAll(path, "parent"); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
	cs, err := NewFileStore(path).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (children + 1) * grantsEach; len(cs) != want {
		t.Errorf("the file holds %d consents after %d grants: some were lost", len(cs), want)
	}
}
