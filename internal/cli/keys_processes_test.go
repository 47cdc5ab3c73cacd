package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
)

// keysCommand is one command of a round, started and not yet awaited.
type keysCommand struct {
	args     []string
	cmd      *exec.Cmd
	start    io.WriteCloser
	out, err bytes.Buffer
}

// Twenty-five 'serve keys' commands run at once as processes of their
// own against one key file (fifteen creates, five revocations, five
// updates), while a store like a running gateway's checks the keys
// throughout: every command exits 0, and afterwards every created key's
// printed token is accepted, every revoked key is refused (by the running
// store and by a fresh one), every update is kept, and the running store
// never saw a revoked key come back nor failed to read the file.
func TestKeyCommandsInParallelProcessesLoseNoWrite(t *testing.T) {
	dir, _ := fakeProject(t, true)
	path := filepath.Join(dir, config.Dir, gateway.KeyFileName)
	const creates, revokes, updates = 15, 5, 5
	type made struct{ id, token string }
	create := func(args ...string) made {
		t.Helper()
		code, out, errs := run(t, dir, nil, append([]string{"serve", "keys", "create", "--json"}, args...)...)
		var k struct {
			ID    string `json:"id"`
			Token string `json:"key"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
			t.Fatalf("create = %d %s %s", code, out, errs)
		}
		return made{k.ID, k.Token}
	}
	var toRevoke, toUpdate []made
	for i := range revokes {
		toRevoke = append(toRevoke, create("--name", fmt.Sprintf("revoke-%d", i)))
	}
	for i := range updates {
		toUpdate = append(toUpdate, create("--name", fmt.Sprintf("update-%d", i)))
	}

	// The running store, looking at the file on every check.
	running := gateway.OpenKeyStore(path)
	done := make(chan struct{})
	var watch sync.WaitGroup
	undone := map[string]bool{}
	var unreadable []string
	watch.Go(func() {
		revoked := map[string]bool{}
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, k := range toRevoke {
				_, err := running.Check(k.token)
				switch {
				case errors.Is(err, gateway.ErrRevokedKey):
					revoked[k.id] = true
				case err != nil:
					unreadable = append(unreadable, err.Error())
				case revoked[k.id]:
					undone[k.id] = true
				}
			}
		}
	})

	var cmds []*keysCommand
	add := func(args ...string) {
		c := &keysCommand{args: args, cmd: cliChild(t, dir, append([]string{"serve", "keys"}, args...)...)}
		c.cmd.Env = append(c.cmd.Env, config.CeilingEnv+"="+os.TempDir())
		var err error
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
		if c.start, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for i := range creates {
		add("create", "--json", "--name", fmt.Sprintf("new-%d", i))
		if i < revokes {
			add("revoke", toRevoke[i].id)
			add("update", toUpdate[i].id, "--rpm", fmt.Sprint(100+i), "--name", fmt.Sprintf("updated-%d", i))
		}
	}
	for _, c := range cmds {
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.cmd.Process.Kill()
	}
	for _, c := range cmds {
		c.start.Close() // every command goes at once
	}
	var created []made
	for _, c := range cmds {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("%v: %v\n%s", c.args, err, c.err.String())
			continue
		}
		if c.args[0] == "create" {
			var k struct {
				ID    string `json:"id"`
				Token string `json:"key"`
			}
			if err := json.NewDecoder(&c.out).Decode(&k); err != nil || k.Token == "" { // the test binary prints PASS after
				t.Errorf("%v printed no key: %v", c.args, err) // the output holds a secret: not shown
				continue
			}
			created = append(created, made{k.ID, k.Token})
		}
	}
	close(done)
	watch.Wait()

	fresh := gateway.OpenKeyStore(path)
	lost := 0
	for _, k := range created {
		if _, err := fresh.Check(k.token); err != nil {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d created keys whose token was printed are not accepted", lost, len(created))
	}
	for _, store := range []*gateway.KeyStore{running, fresh} {
		kept := 0
		for _, k := range toRevoke {
			if _, err := store.Check(k.token); !errors.Is(err, gateway.ErrRevokedKey) {
				kept++
			}
		}
		if kept > 0 {
			t.Errorf("%d of %d revoked keys are still accepted (or unreadable)", kept, revokes)
		}
	}
	keys, err := fresh.List()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]gateway.Key{}
	for _, k := range keys {
		byID[k.ID] = k
	}
	for i, k := range toUpdate {
		if got := byID[k.id]; got.RPM != 100+i || got.Name != fmt.Sprintf("updated-%d", i) {
			t.Errorf("update %d lost: the key has rpm %d, name %q", i, got.RPM, got.Name)
		}
	}
	if len(keys) != revokes+updates+creates {
		t.Errorf("the file holds %d keys, want %d", len(keys), revokes+updates+creates)
	}
	if len(undone) > 0 {
		t.Errorf("the running store saw %d of %d revoked keys accepted again", len(undone), revokes)
	}
	if len(unreadable) > 0 {
		t.Errorf("the running store failed %d checks: %v", len(unreadable), unreadable[:1])
	}
}
