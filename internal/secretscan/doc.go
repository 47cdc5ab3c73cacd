// Package secretscan holds no code: its test drives the provider layer
// through failures with recognisable credentials and scans everything it
// produced (logs, traces, metrics, ledger, cache, gateway answers, errors)
// for them.
package secretscan
