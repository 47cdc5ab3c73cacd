#!/usr/bin/env bash
# Gateway load benchmark (docs/benchmarks.md, "Gateway"). Starts, on
# loopback only:
#   - the provider fakes (loadbench fake: the Anthropic fake on
#     /v1/messages, the OpenAI fake on every other path) as the upstream,
#   - 'cortexbuild serve' in front of it twice: "full", with the ledger
#     (fast path), budgets, the response cache and virtual-key auth on, and
#     "lean", with the ledger but no budgets, no cache and --no-auth,
#   - the same two from another build when BEFORE names its binary
#     ("full-before", "lean-before"), for a before/after in one run,
#   - a pass-through Go reverse proxy (loadbench proxy: net/http server
#     and client, nothing else), the floor of two HTTP hops on this machine,
#   - Portkey's open-source gateway (@portkey-ai/gateway) in front of the
#     same fake, when PORTKEY_DIR holds an npm install of it,
# pins the gateways to CPU 0 and the load tool and the fake to CPU 1 when
# taskset is available, and runs loadbench against the fake directly (the
# baseline), then each target in turn, in one run. Peak RSS is each
# process's high-water mark over the whole run, overload phases included.
#
#   scripts/gateway-bench.sh                      # figures
#   PROFILE=1 scripts/gateway-bench.sh            # also CPU and allocation profiles of "full"
#   BEFORE=/tmp/old/cortexbuild scripts/gateway-bench.sh
#   PORTKEY_DIR=/tmp/portkey scripts/gateway-bench.sh
#
# Two suites, each target in turn and the floor in the same run:
#   load    loadbench run: open-loop rates, a streamed phase and a closed
#           loop of small Chat Completions calls (the original benchmark);
#   coding  loadbench coding: what coding agents send, on a Messages route
#           relayed to the Anthropic fake, a Chat Completions route relayed
#           to the OpenAI fake, and a Messages route translated to the
#           OpenAI fake: big prompts (CPU per MB of request body), long
#           streams (CPU per streamed event), many slow streams held open
#           (refusals, RSS per open stream) and small calls (CPU per
#           request), each as a ratio to the floor's.
#
# Environment: SUITES (default load,coding), OUT (work directory, default
# a temporary one; kept).
#   load:   DURATION (each open-loop phase, default 8s), RATES (default
#           500,1000,2000; add 4000 where the load tool and the fake have
#           more than one core between them), CLOSED (closed-loop phase,
#           default 8s), WORKERS (closed-loop workers, default 32).
#   coding: WORKLOADS (default slow,small,long,big), BIG_KB (200), BIG
#           (each big-prompt phase, 3s), BIG_WORKERS (4), CHUNKS (content
#           chunks of a long answer, 1000), LONG (3s), LONG_WORKERS (16),
#           LONG_EVERY (the fake's pause between a long stream's events,
#           1ms; 0 sends them back to back), SMALL (3s), SMALL_WORKERS
#           (32), SLOW_STREAMS (2000),
#           SLOW_RATE (streams opened per second, 1000), SLOW_EVERY (500ms),
#           SLOW_CHUNKS (12), SLOW_ROUTES (messages; all: every route),
#           WARMUP (small calls on each route before a target is measured,
#           1s; a profile's share of them shrinks with less),
#           ROUTES (the routes to run, by label: messages, chat,
#           messages→openai; default all),
#           CODING_TARGETS (the gateways, default full,lean, each with its
#           -before twin when BEFORE is set).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/gateway-bench.XXXXXX)}
DURATION=${DURATION:-8s}
RATES=${RATES:-500,1000,2000}
CLOSED=${CLOSED:-8s}
WORKERS=${WORKERS:-32}
SUITES=${SUITES:-load,coding}
CODING_TARGETS=${CODING_TARGETS:-full,lean}
FAKE_PORT=18801 GW_PORT=18802 PK_PORT=18803 PX_PORT=18804 LEAN_PORT=18805 GWB_PORT=18806 LEANB_PORT=18807
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

# Two projects whose builder agent is served by the OpenAI fake and whose
# planner agent by the Anthropic fake. "full" has budgets and the response
# cache on for both (every benchmark prompt is unique, so each call misses
# the cache and is stored in it) and virtual-key auth; "lean" has the
# ledger only, no budgets, no cache, and no keys.
project() { # dir full|lean
	mkdir -p "$1/.cortexbuild"
	local agent="    cache: false"
	if [ "$2" = full ]; then
		agent=$'    cache: true\n    budget: "1.00"'
	fi
	{
		cat <<EOF
orchestration: true
providers:
  fake:
    type: openai_compatible
    profile: openai
    base_url: http://127.0.0.1:$FAKE_PORT/v1
    credentials:
      api_key: \${BENCH_UPSTREAM_KEY}
  anth:
    type: anthropic
    base_url: http://127.0.0.1:$FAKE_PORT
    credentials:
      api_key: \${BENCH_UPSTREAM_KEY}
agents:
  builder:
    model: gpt-5-mini
    providers: [fake]
$agent
  planner:
    model: claude-sonnet-4-6
    providers: [anth]
$agent
EOF
		if [ "$2" = full ]; then
			cat <<EOF
budgets:
  task: "100000"
  project_monthly: "1000000"
cache:
  backend: memory
  max_entries: 10000
EOF
		fi
	} >"$1/.cortexbuild/llm-config.yaml"
}
export BENCH_UPSTREAM_KEY=$UPSTREAM_KEY

# gateway_target NAME BINARY PORT full|lean [PROFILE]: writes the project,
# starts the gateway (under a CPU profile when PROFILE is set) and adds it
# to TARGETS.
gateway_target() {
	local name=$1 bin=$2 port=$3 kind=$4 prof=${5:-} dir="$OUT/$1"
	project "$dir" "$kind"
	local args=(serve --listen "127.0.0.1:$port") auth="header=X-CortexBuild-Task:bench"
	if [ "$kind" = full ]; then
		local key
		key=$(cd "$dir" && "$bin" serve keys create --name bench 2>/dev/null)
		auth="header=Authorization:Bearer $key,$auth"
	else
		args+=(--no-auth)
	fi
	local cmd=("$bin")
	[ -n "$prof" ] && cmd=("$OUT/loadbench" profile -out "$prof" -allocs "${prof%-cpu.pprof}-allocs.pprof" --)
	(cd "$dir" && exec "${PIN0[@]}" "${cmd[@]}" "${args[@]}" >"$dir/gateway.log" 2>"$dir/gateway.err") &
	local pid=$!
	pids+=("$pid")
	wait_port "$port"
	TARGETS+=(-target "name=$name,url=http://127.0.0.1:$port,model=builder,pid=$pid,$auth")
	if [[ ",$CODING_TARGETS," == *",${name%-before},"* ]]; then
		CTARGETS+=(-target "name=$name,url=http://127.0.0.1:$port,pid=$pid,$auth,route=messages:messages:planner,route=chat:chat:builder,route=messages→openai:messages:builder")
	fi
	if [ "$name" = full ]; then GW_PID=$pid; fi
}

TARGETS=(-target "name=direct,url=http://127.0.0.1:$FAKE_PORT,model=gpt-5-mini,header=Authorization:Bearer $UPSTREAM_KEY")

"${PIN0[@]}" "$OUT/loadbench" proxy -listen "127.0.0.1:$PX_PORT" -upstream "http://127.0.0.1:$FAKE_PORT" >"$OUT/proxy.log" 2>&1 &
PX_PID=$!
pids+=($PX_PID)
wait_port $PX_PORT

TARGETS+=(-target "name=go-proxy,url=http://127.0.0.1:$PX_PORT,model=gpt-5-mini,pid=$PX_PID,header=Authorization:Bearer $UPSTREAM_KEY")
CTARGETS=(-target "name=go-proxy,url=http://127.0.0.1:$PX_PORT,pid=$PX_PID,header=Authorization:Bearer $UPSTREAM_KEY,route=messages:messages:claude-sonnet-4-6,route=chat:chat:gpt-5-mini")
gateway_target full "$OUT/cortexbuild" $GW_PORT full "${PROFILE:+$OUT/gateway-cpu.pprof}"
gateway_target lean "$OUT/cortexbuild" $LEAN_PORT lean
if [ -n "${BEFORE:-}" ]; then
	gateway_target full-before "$BEFORE" $GWB_PORT full
	gateway_target lean-before "$BEFORE" $LEANB_PORT lean
fi

if [ -n "${PORTKEY_DIR:-}" ] && [ -f "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" ]; then
	"${PIN0[@]}" node "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" --port=$PK_PORT --headless \
		>"$OUT/portkey.log" 2>&1 &
	PK_PID=$!
	pids+=($PK_PID)
	wait_port $PK_PORT
	TARGETS+=(-target "name=portkey,url=http://127.0.0.1:$PK_PORT,model=gpt-5-mini,pid=$PK_PID,header=Authorization:Bearer $UPSTREAM_KEY,header=x-portkey-provider:openai,header=x-portkey-custom-host:http://127.0.0.1:$FAKE_PORT/v1")
fi

if [[ ",$SUITES," == *",load,"* ]]; then
	"${PIN1[@]}" "$OUT/loadbench" run "${TARGETS[@]}" -rates "$RATES" -duration "$DURATION" -closed "$CLOSED" -workers "$WORKERS" | tee "$OUT/table.md"
fi
if [[ ",$SUITES," == *",coding,"* ]]; then
	"${PIN1[@]}" "$OUT/loadbench" coding "${CTARGETS[@]}" -workloads "${WORKLOADS:-slow,small,long,big}" \
		-big-kb "${BIG_KB:-200}" -big "${BIG:-3s}" -big-workers "${BIG_WORKERS:-4}" \
		-chunks "${CHUNKS:-1000}" -long "${LONG:-3s}" -long-workers "${LONG_WORKERS:-16}" -long-every "${LONG_EVERY:-1ms}" \
		-small "${SMALL:-3s}" -small-workers "${SMALL_WORKERS:-32}" \
		-slow-streams "${SLOW_STREAMS:-2000}" -slow-rate "${SLOW_RATE:-1000}" -slow-every "${SLOW_EVERY:-500ms}" \
		-slow-chunks "${SLOW_CHUNKS:-12}" -slow-routes "${SLOW_ROUTES:-messages}" -routes "${ROUTES:-all}" -warmup "${WARMUP:-1s}" \
		2> >(tee "$OUT/coding.log" >&2) | tee "$OUT/coding.md"
fi

if [ -n "${PROFILE:-}" ]; then
	kill -TERM "$GW_PID"
	wait "$GW_PID" || true
	go tool pprof -top -nodecount=40 "$OUT/loadbench" "$OUT/gateway-cpu.pprof" >"$OUT/gateway-cpu.txt" 2>/dev/null || true
	go tool pprof -sample_index=alloc_space -top -nodecount=40 "$OUT/loadbench" "$OUT/gateway-allocs.pprof" >"$OUT/gateway-allocs.txt" 2>/dev/null || true
	echo "CPU profile: $OUT/gateway-cpu.pprof (top: $OUT/gateway-cpu.txt), allocations: $OUT/gateway-allocs.pprof (top: $OUT/gateway-allocs.txt)" >&2
fi
