package ledgertest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// PlainClient is another program's ordinary SQLite client of a database
// file: the sqlite3 tool, run again and again, each run a process of its
// own that opens the database with SQLite's default settings (no busy
// timeout, the journal mode the file has), runs one query and closes it,
// as a backup or monitoring script would. A connection that closes and
// finds no other connection to the file (no other process holding a lock
// on it) checkpoints the WAL and deletes it and the -shm file; the client
// notes every round after which <db>-wal is missing.
//
// The sqlite3 tool is used rather than a Go program because the SQLite
// linked into this module (modernc.org/sqlite) does not delete the WAL in
// that state while the -shm file is still mapped elsewhere; the SQLite
// most systems ship (3.40) does, and so does every program linked with it.
type PlainClient struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	rep     PlainClientReport
	started int // rounds begun
}

// PlainClientReport is what a [PlainClient] saw.
type PlainClientReport struct {
	Rounds     int // open, query, close
	WALMissing int // rounds after which <db>-wal did not exist
	Errors     int // rounds that failed (the first error is in FirstError)
	FirstError string
}

// StartPlainClient starts a [PlainClient] on the database file at path,
// running query each round, and returns once it has done its first round.
// It skips the test where the sqlite3 tool is not installed.
func StartPlainClient(t *testing.T, path, query string) *PlainClient {
	t.Helper()
	tool, err := exec.LookPath("sqlite3")
	if err != nil {
		const why = "the sqlite3 tool is not installed (apt-get install sqlite3): it plays another program's SQLite client"
		if testenv.InCI() {
			t.Fatal(why + "; CI installs it (.ci/run)")
		}
		t.Skip(why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &PlainClient{t: t, cancel: cancel, done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	t.Cleanup(c.halt)
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			c.mu.Lock()
			c.started++
			c.mu.Unlock()
			out, err := exec.CommandContext(ctx, tool, path, query).CombinedOutput()
			if ctx.Err() != nil {
				break
			}
			_, serr := os.Stat(path + "-wal")
			c.mu.Lock()
			if err != nil || strings.Contains(string(out), "Error") {
				if c.rep.Errors == 0 {
					c.rep.FirstError = strings.TrimSpace(string(out)) + " " + errString(err)
				}
				c.rep.Errors++
			}
			if errors.Is(serr, fs.ErrNotExist) {
				c.rep.WALMissing++
			}
			c.rep.Rounds++
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	c.Sync()
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Sync returns once the client has done a whole round that began after
// the call.
func (c *PlainClient) Sync() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := c.started + 1
	for c.rep.Rounds < want {
		select {
		case <-c.done:
			c.t.Fatal("the plain SQLite client stopped")
		default:
		}
		c.cond.Wait()
	}
}

func (c *PlainClient) halt() {
	c.cancel()
	<-c.done
}

// Stop ends the client's loop and returns what it saw.
func (c *PlainClient) Stop() PlainClientReport {
	c.halt()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rep
}
