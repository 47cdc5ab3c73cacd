#!/usr/bin/env bash
# Gateway load benchmark (docs/benchmarks.md, "Gateway"). Starts, on
# loopback only:
#   - the OpenAI fake (loadbench fake) as the upstream,
#   - 'cortexbuild serve' in front of it, with the ledger (fast path),
#     budgets, the response cache and virtual-key auth on,
#   - a pass-through Go reverse proxy (loadbench proxy: net/http server
#     and client, nothing else), the floor of two HTTP hops on this machine,
#   - Portkey's open-source gateway (@portkey-ai/gateway) in front of the
#     same fake, when PORTKEY_DIR holds an npm install of it,
# pins the gateways to CPU 0 and the load tool and the fake to CPU 1 when
# taskset is available, and runs loadbench against the fake directly (the
# baseline), through CortexBuild and through Portkey, in one run.
#
#   scripts/gateway-bench.sh                      # figures
#   PROFILE=1 scripts/gateway-bench.sh            # also a CPU profile of the gateway
#   PORTKEY_DIR=/tmp/portkey scripts/gateway-bench.sh
#
# Environment: DURATION (each open-loop phase, default 8s), RATES
# (default 500,1000,2000), CLOSED (closed-loop phase, default 8s), WORKERS
# (closed-loop workers, default 32), OUT (work directory, default a
# temporary one; kept).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/gateway-bench.XXXXXX)}
DURATION=${DURATION:-8s}
RATES=${RATES:-500,1000,2000}
CLOSED=${CLOSED:-8s}
WORKERS=${WORKERS:-32}
FAKE_PORT=18801 GW_PORT=18802 PK_PORT=18803 PX_PORT=18804
UPSTREAM_KEY=sk-upstream-bench

PIN0=() PIN1=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	PIN0=(taskset -c 0) PIN1=(taskset -c 1)
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_port() { # port
	for _ in $(seq 1 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "nothing listens on port $1" >&2
	return 1
}

echo "work directory: $OUT" >&2
(cd "$ROOT" && go build -o "$OUT/cortexbuild" ./cmd/cortexbuild && go build -o "$OUT/loadbench" ./gateway/loadbench)

"${PIN1[@]}" "$OUT/loadbench" fake -listen "127.0.0.1:$FAKE_PORT" -key "$UPSTREAM_KEY" >"$OUT/fake.log" 2>&1 &
pids+=($!)
wait_port $FAKE_PORT

# A project whose builder agent is served by the fake, with budgets and
# the response cache on (every benchmark prompt is unique, so each call
# misses the cache and is stored in it).
PROJ="$OUT/project"
mkdir -p "$PROJ/.cortexbuild"
cat >"$PROJ/.cortexbuild/llm-config.yaml" <<EOF
orchestration: true
providers:
  fake:
    type: openai_compatible
    profile: openai
    base_url: http://127.0.0.1:$FAKE_PORT/v1
    credentials:
      api_key: \${BENCH_UPSTREAM_KEY}
agents:
  builder:
    model: gpt-5-mini
    providers: [fake]
    cache: true
    budget: "1.00"
budgets:
  task: "100000"
  project_monthly: "1000000"
cache:
  backend: memory
  max_entries: 10000
EOF
export BENCH_UPSTREAM_KEY=$UPSTREAM_KEY
KEY=$(cd "$PROJ" && "$OUT/cortexbuild" serve keys create --name bench 2>/dev/null)

GW=("$OUT/cortexbuild")
if [ -n "${PROFILE:-}" ]; then
	GW=("$OUT/loadbench" profile -out "$OUT/gateway-cpu.pprof" --)
fi
(cd "$PROJ" && exec "${PIN0[@]}" "${GW[@]}" serve --listen "127.0.0.1:$GW_PORT" >"$OUT/gateway.log" 2>"$OUT/gateway.err") &
GW_PID=$!
pids+=($GW_PID)
wait_port $GW_PORT

"${PIN0[@]}" "$OUT/loadbench" proxy -listen "127.0.0.1:$PX_PORT" -upstream "http://127.0.0.1:$FAKE_PORT" >"$OUT/proxy.log" 2>&1 &
PX_PID=$!
pids+=($PX_PID)
wait_port $PX_PORT

TARGETS=(
	-target "name=direct,url=http://127.0.0.1:$FAKE_PORT,model=gpt-5-mini,header=Authorization:Bearer $UPSTREAM_KEY"
	-target "name=go-proxy,url=http://127.0.0.1:$PX_PORT,model=gpt-5-mini,pid=$PX_PID,header=Authorization:Bearer $UPSTREAM_KEY"
	-target "name=cortexbuild,url=http://127.0.0.1:$GW_PORT,model=builder,pid=$GW_PID,header=Authorization:Bearer $KEY,header=X-CortexBuild-Task:bench"
)

if [ -n "${PORTKEY_DIR:-}" ] && [ -f "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" ]; then
	"${PIN0[@]}" node "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" --port=$PK_PORT --headless \
		>"$OUT/portkey.log" 2>&1 &
	PK_PID=$!
	pids+=($PK_PID)
	wait_port $PK_PORT
	TARGETS+=(-target "name=portkey,url=http://127.0.0.1:$PK_PORT,model=gpt-5-mini,pid=$PK_PID,header=Authorization:Bearer $UPSTREAM_KEY,header=x-portkey-provider:openai,header=x-portkey-custom-host:http://127.0.0.1:$FAKE_PORT/v1")
fi

"${PIN1[@]}" "$OUT/loadbench" run "${TARGETS[@]}" -rates "$RATES" -duration "$DURATION" -closed "$CLOSED" -workers "$WORKERS" | tee "$OUT/table.md"

if [ -n "${PROFILE:-}" ]; then
	kill -TERM "$GW_PID"
	wait "$GW_PID" || true
	go tool pprof -top -nodecount=40 "$OUT/loadbench" "$OUT/gateway-cpu.pprof" >"$OUT/gateway-cpu.txt" 2>/dev/null || true
	echo "CPU profile: $OUT/gateway-cpu.pprof (top: $OUT/gateway-cpu.txt)" >&2
fi
