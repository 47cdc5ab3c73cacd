// Package flock takes exclusive advisory locks on open files, shared by
// every process of the machine: the ledger's journals, and the lock files
// beside the small state files that several processes read, change and
// write (internal/atomicfile.Locked). A lock goes with the open file: it is
// released when the file is closed or the process ends, however it ends.
package flock
