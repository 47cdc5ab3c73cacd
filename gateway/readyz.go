package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// ReadyTimeout bounds each engine's ping in /readyz.
const ReadyTimeout = time.Second

// Engine is an engine the gateway's calls depend on, checked by /readyz.
type Engine struct {
	// Name names it in /readyz's answer: "postgres", "redis".
	Name string
	// Required: while it is down the replica is not ready (503), for no
	// call can be served without it. Otherwise the replica is ready but
	// degraded (200).
	Required bool
	// Ping asks it for an answer; it is given ReadyTimeout.
	Ping func(ctx context.Context) error
}

type engineStatus struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Status   string `json:"status"`           // "up" or "down"
	Reason   string `json:"reason,omitempty"` // why down, without addresses or credentials
}

// readyz answers whether this replica can serve calls: every engine of
// Options.Ready is pinged at once, each within ReadyTimeout. 200 with
// status "ready" when all answer, "degraded" when only engines that are
// not required are down; 503 "not ready" when a required one is. The body
// names each engine and says which are down, never an address or a
// credential. Unauthenticated, like /healthz.
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	out := make([]engineStatus, len(g.opts.Ready))
	var wg sync.WaitGroup
	for i, e := range g.opts.Ready {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			s := engineStatus{Name: e.Name, Required: e.Required, Status: "up"}
			if err := e.Ping(ctx); err != nil {
				s.Status, s.Reason = "down", "unreachable"
				if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
					s.Reason = "no answer within " + ReadyTimeout.String()
				}
			}
			out[i] = s
		})
	}
	wg.Wait()
	status, code := "ready", http.StatusOK
	var down []string
	for _, s := range out {
		if s.Status == "up" {
			continue
		}
		down = append(down, s.Name)
		if s.Required {
			status, code = "not ready", http.StatusServiceUnavailable
		} else if code == http.StatusOK {
			status = "degraded"
		}
	}
	body := map[string]any{"status": status, "engines": out}
	if len(down) > 0 {
		body["down"] = down
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, code, body)
}
