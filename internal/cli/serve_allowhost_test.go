package cli

import (
	"net/http"
	"net/url"
	"testing"
)

// --allow-host adds Host names the gateway answers to, as
// gateway.allowed_hosts does: what the container image passes so that a
// published port (docker run -p 8787:8787, then http://localhost:8787)
// is answered although the container's own address is not loopback.
func TestServeAllowHostFlag(t *testing.T) {
	dir, _ := fakeProject(t, true)
	status := func(base, host string) int {
		t.Helper()
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodGet, base+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host + ":" + u.Port()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	base, stop := startServe(t, dir, keyEnv)
	if got := status(base, "gw.example"); got != http.StatusMisdirectedRequest {
		t.Errorf("without --allow-host, Host gw.example = %d, want 421", got)
	}
	stop()

	base, stop = startServe(t, dir, keyEnv, "--allow-host", "gw.example", "--allow-host", "other.example")
	defer stop()
	for host, want := range map[string]int{"gw.example": 200, "other.example": 200, "elsewhere.example": 421} {
		if got := status(base, host); got != want {
			t.Errorf("with --allow-host gw.example --allow-host other.example, Host %s = %d, want %d", host, got, want)
		}
	}
}
