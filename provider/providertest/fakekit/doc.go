// Package fakekit is the protocol-independent machinery shared by the
// wire-faithful provider fakes (anthropicfake, openaifake, geminifake):
//
//   - the httptest lifecycle: [Core.Start] listens on 127.0.0.1 (or [::1]
//     when there is no IPv4 loopback), [Core.URL], [Core.Client], and
//     [Core.Close], which releases every held reply ([Core.Done]) before
//     stopping the server;
//   - per-route FIFO reply queues ([Core.EnqueueRoute], [Core.Pending],
//     [Core.Next]), validated on the way in by [Spec.Validate];
//   - request recording ([Core.Record], [Core.Requests],
//     [Core.WaitRequests]);
//   - connection tracking through an http.Server ConnState hook
//     ([Core.ConnState], [Core.OpenConns], [Core.WaitOpenConns],
//     [Core.ActiveConns], [Core.WaitActiveConns]);
//   - a seeded, mutex-guarded random source for generated ids ([Rand]);
//   - the protocol-independent part of a recorded request
//     ([RecordedBase], embedded by each fake's Recorded, [NewRecordedBase],
//     [CloneBase], [ReadBody]);
//   - response plumbing: holding a reply ([Core.Hold]), writing a body
//     that may be cut short ([WriteBody]), writing a stream that is
//     flushed piece by piece and can be cut ([StreamWriter]), and copying
//     reply headers ([WithHeader]);
//   - text helpers for wire-faithful streaming ([CutRunes], [SpacedJSON]).
//
// Protocol specifics (event names, framing, error bodies, standard
// headers) stay in the fakes.
//
// Every wait is non-polling: a state change (a recorded request or a
// connection state change) closes and replaces a channel that waiters
// select on together with their context.
//
// A fake keeps its protocol (handlers, wire formats, error bodies, its own
// Route, Reply and Recorded types) and holds a *Core as an unexported
// field. It embeds [Public] through an unexported alias, which promotes
// exactly the methods that are part of every fake's exported API (URL,
// Client, Close, EnqueueRoute, Pending, Requests, WaitRequests, the
// connection counters and ConnState) and none of the internal operations
// (Start, Next, Record, Done). Only Enqueue, which names the fake's
// default route, is written by each fake.
//
// The package uses only the standard library.
package fakekit
