package orchestrator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/orchestrator"
)

func TestWebhookNotifierPostsJSON(t *testing.T) {
	got := make(chan orchestrator.Notification, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var n orchestrator.Notification
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &n) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got <- n
	}))
	defer srv.Close()
	n := orchestrator.Notification{Level: "critical", Event: "project_paused", Project: "p", Provider: "anthropic", Message: "refused", At: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	if err := (orchestrator.WebhookNotifier{URL: srv.URL}).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r != n {
		t.Errorf("received %+v", r)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer bad.Close()
	if err := (orchestrator.Notifiers{orchestrator.WebhookNotifier{URL: bad.URL}}).Notify(context.Background(), n); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("failing webhook = %v", err)
	}
}

func TestFileStateSurvivesAndReportsCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".cortexbuild", "project-state.json")
	a := &orchestrator.FileState{Path: path}
	if _, paused, err := a.Paused(context.Background()); paused || err != nil {
		t.Fatalf("fresh state = %v %v", paused, err)
	}
	if err := a.Pause(context.Background(), "key revoked"); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v", st.Mode())
	}
	b := &orchestrator.FileState{Path: path} // another process
	if reason, paused, err := b.Paused(context.Background()); !paused || reason != "key revoked" || err != nil {
		t.Errorf("second reader = %q %v %v", reason, paused, err)
	}
	if err := b.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, paused, _ := a.Paused(context.Background()); paused {
		t.Error("resume not seen")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Paused(context.Background()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt file = %v", err)
	}
}

// With a recheck period the state is looked at once per period: its own
// pause and resume are seen at once, another process's within the period,
// and a corrupt file fails every call.
func TestFileStateRecheck(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "project-state.json")
	a := &orchestrator.FileState{Path: path, Recheck: time.Hour}
	if _, paused, err := a.Paused(ctx); paused || err != nil {
		t.Fatalf("fresh state = %v %v", paused, err)
	}
	if err := (&orchestrator.FileState{Path: path}).Pause(ctx, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, paused, _ := a.Paused(ctx); paused {
		t.Error("within the recheck period the file was looked at again")
	}
	if err := a.Pause(ctx, "here"); err != nil {
		t.Fatal(err)
	}
	if reason, paused, _ := a.Paused(ctx); !paused || reason != "here" {
		t.Errorf("own pause = %q %v", reason, paused)
	}
	if err := a.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, paused, _ := a.Paused(ctx); paused {
		t.Error("own resume not seen")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &orchestrator.FileState{Path: path, Recheck: time.Hour}
	for i := range 2 {
		if _, _, err := b.Paused(ctx); err == nil {
			t.Errorf("call %d on a corrupt file: no error", i)
		}
	}
}
