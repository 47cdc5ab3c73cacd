// Package hostcli holds the integration suite that drives the real host
// CLIs (Claude Code, Codex CLI, Copilot CLI) at the versions pinned in
// tools/hostversions against `cortexbuild serve`, offline: the CLIs, the
// gateway and the scripted providers behind it run in a network namespace
// that has only loopback. It has tests only; see docs/gateway.md, "The
// hosts' own test".
package hostcli
