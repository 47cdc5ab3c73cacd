package cli

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
)

// The console's header names the project by its id, whatever directory
// 'serve' runs in and however --config is spelled: never "." or the
// base name of a relative path.
func TestConsoleHeaderNamesTheProject(t *testing.T) {
	dir, _ := fakeProject(t, true)
	if code, _, errs := run(t, dir, nil, "serve", "keys", "list"); code != 0 {
		t.Fatalf("keys list = %d %s", code, errs)
	}
	want := keptProjectID(t, dir)
	for _, tc := range []struct{ wd, config string }{
		{filepath.Dir(dir), filepath.Join(filepath.Base(dir), config.Dir, config.FileName)},
		{filepath.Join(dir, config.Dir), config.FileName},
		{dir, ""},
	} {
		args := []string{"--no-auth"}
		if tc.config != "" {
			args = append(args, "--config", tc.config)
		}
		base, _, stop := serveIn(t, nil, tc.wd, keyEnv, args...)
		resp, err := http.Get(base + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code, errs := stop(); code != 0 {
			t.Fatalf("serve = %d %s", code, errs)
		}
		m := regexp.MustCompile(`id="project-name">([^<]*)<`).FindSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil || string(m[1]) != want {
			t.Errorf("serve --config %q in %s: %d, header names %q, want %q", tc.config, tc.wd, resp.StatusCode, m, want)
		}
	}
}
