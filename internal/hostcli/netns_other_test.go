//go:build !linux

package hostcli_test

const inNetns = "CORTEXBUILD_HOSTCLI_NETNS"

// isolate: network namespaces are Linux's; elsewhere the tests skip.
func isolate() (int, bool) { return 0, false }
